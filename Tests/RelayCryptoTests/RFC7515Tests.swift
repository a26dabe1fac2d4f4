import Foundation
import RelayCrypto
import RelayTestSupport
import Testing

/// RFC 7515 Appendix A.3: someone else's ES256 key and token, so the raw r‖s handling and the
/// key import are checked against the standard rather than against this code.
@Suite("RFC 7515 A.3 ES256 example")
struct RFC7515Tests {
    static let x = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"
    static let y = "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
    static let d = "jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI"
    static let token =
        "eyJhbGciOiJFUzI1NiJ9"
        + ".eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
        + ".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"

    /// The uncompressed point 04 || x || y.
    static func point() throws -> [UInt8] {
        [0x04] + (try #require(Base64.urlDecode(x))) + (try #require(Base64.urlDecode(y)))
    }

    /// SubjectPublicKeyInfo for a P-256 point: fixed DER prefix (id-ecPublicKey, prime256v1).
    static func publicKeyPEM() throws -> String {
        pem("PUBLIC KEY", TestHex.bytes("3059301306072a8648ce3d020106082a8648ce3d030107034200") + (try point()))
    }

    /// PKCS#8 PrivateKeyInfo wrapping an RFC 5915 ECPrivateKey with its public key.
    static func privateKeyPEM() throws -> String {
        let scalar = try #require(Base64.urlDecode(d))
        let der =
            TestHex.bytes("308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b0201010420") + scalar
            + TestHex.bytes("a144034200") + (try point())
        return pem("PRIVATE KEY", der)
    }

    static func pem(_ label: String, _ der: [UInt8]) -> String {
        let body = Array(Base64.encode(der))
        let lines = stride(from: 0, to: body.count, by: 64).map { String(body[$0..<min($0 + 64, body.count)]) }
        return "-----BEGIN \(label)-----\n" + lines.joined(separator: "\n") + "\n-----END \(label)-----\n"
    }

    @Test("the published token verifies with the published public key")
    func publishedTokenVerifies() throws {
        let key = try P256.Signing.PublicKey(pemRepresentation: try Self.publicKeyPEM())
        #expect(JWT.verifyES256(Self.token, using: key))
        let parts = try #require(JWT.decode(Self.token))
        #expect(parts.header == Array(#"{"alg":"ES256"}"#.utf8))
        #expect(
            parts.claims
                == Array("{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true}".utf8))
        #expect(key.isValidSignature(parts.signature, for: parts.signingInput))
        var altered = parts.signingInput
        altered[altered.count - 1] ^= 1
        #expect(!key.isValidSignature(parts.signature, for: altered))
    }

    @Test("the published private key derives the published public key and signs verifiable tokens")
    func publishedPrivateKey() throws {
        let privateKey = try P256.Signing.PrivateKey(pemRepresentation: try Self.privateKeyPEM())
        #expect(privateKey.publicKey.pemRepresentation == (try Self.publicKeyPEM()))
        #expect(JWT.verifyES256(Self.token, using: privateKey.publicKey))
        let token = try JWT.signES256(header: #"{"alg":"ES256"}"#, claims: #"{"iss":"joe"}"#, using: privateKey)
        let publicKey = try P256.Signing.PublicKey(pemRepresentation: try Self.publicKeyPEM())
        #expect(JWT.verifyES256(token, using: publicKey))
    }
}
