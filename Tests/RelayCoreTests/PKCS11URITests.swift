import RelayCore
import Testing

/// RFC 7512 URIs as `APNS_KEY_*` may hold them (docs/DESIGN.md, "APNs keys in a PKCS#11 token"): the path attributes
/// token, object and id, percent-encoded as the RFC says; a PIN, a module or an attribute the relay does not match on
/// refused, and a refusal never repeats a value from the query.
@Suite struct PKCS11URITests {
    func parse(_ text: String) throws(ConfigurationError) -> PKCS11URI {
        try PKCS11URI(parsing: text, subject: "APNS_KEY_SANDBOX")
    }

    func refusal(_ text: String) -> String? {
        do {
            _ = try parse(text)
            return nil
        } catch {
            #expect(error.subject == "APNS_KEY_SANDBOX")
            return error.reason
        }
    }

    @Test func theContractsExample() throws {
        let uri = try parse("pkcs11:token=duo-relay;object=apns-sandbox")
        #expect(uri == PKCS11URI(token: "duo-relay", object: "apns-sandbox"))
        #expect(uri.description == "pkcs11:token=duo-relay;object=apns-sandbox")
    }

    @Test func percentEncodingIsDecodedAndTheIdIsBytes() throws {
        let uri = try parse("pkcs11:token=My%20HSM;object=apns%2Fsandbox;id=%01%fF%00;type=private")
        #expect(uri.token == "My HSM")
        #expect(uri.object == "apns/sandbox")
        #expect(uri.id == [0x01, 0xFF, 0x00])
        #expect(uri.description == "pkcs11:token=My%20HSM;object=apns%2Fsandbox;id=%01%FF%00")
        // The canonical form parses back to the same URI.
        #expect(try parse(uri.description) == uri)
        #expect(try parse("PKCS11:id=a") == PKCS11URI(id: [0x61]))
        #expect(try parse("pkcs11:object=a:b@c&d!$'()*+,=") == PKCS11URI(object: "a:b@c&d!$'()*+,="))
    }

    @Test func aPINInTheURIIsRefusedAndNotRepeated() {
        for text in [
            "pkcs11:token=t;object=o?pin-value=secret-1234", "pkcs11:object=o?pin-source=file:/secret-1234",
            "pkcs11:object=o;pin-value=secret-1234",
        ] {
            let reason = refusal(text)
            #expect(reason?.contains("APNS_PKCS11_PIN") == true, "\(text)")
            #expect(reason?.contains("secret-1234") == false)
        }
    }

    @Test(arguments: [
        ("pkcs11:object=o?module-path=/lib/x.so", "apns.pkcs11_module"),
        ("pkcs11:object=o?other=secret-1234", "query attribute"),
        ("pkcs11:object=o;serial=1234", "serial is not an attribute"),
        ("pkcs11:object=o;slot-id=1", "slot-id is not an attribute"),
        ("pkcs11:object=o;type=public", "type must be private"),
        ("pkcs11:token=t", "names no key"),
        ("pkcs11:", "an empty attribute"),
        ("pkcs11:object=o;;id=1", "an empty attribute"),
        ("pkcs11:object=o;id", "without ="),
        ("pkcs11:object=o;object=p", "more than once"),
        ("pkcs11:object=", "object is empty"),
        ("pkcs11:object=a%2", "two hex digits"),
        ("pkcs11:object=a%zz", "two hex digits"),
        ("pkcs11:object=a b", "percent-encoded"),
        ("pkcs11:object=a/b", "percent-encoded"),
        ("pkcs11:object=%FF", "not UTF-8"),
        ("pkcs11:object=o;token=123456789012345678901234567890123", "32 bytes"),
        ("pkcs11:Object=o", "not a name"),
        ("-----BEGIN PRIVATE KEY-----", "must start with pkcs11:"),
    ])
    func refused(_ text: String, _ expected: String) {
        let reason = refusal(text)
        #expect(reason?.contains(expected) == true, "\(text): \(reason ?? "accepted")")
        #expect(reason?.contains("secret-1234") != true)
    }

    @Test func whatIsAURI() {
        #expect(PKCS11URI.isURI("pkcs11:object=o"))
        #expect(PKCS11URI.isURI("Pkcs11:object=o"))
        #expect(!PKCS11URI.isURI("-----BEGIN PRIVATE KEY-----\npkcs11:"))
        #expect(!PKCS11URI.isURI("pkcs11"))
    }
}
