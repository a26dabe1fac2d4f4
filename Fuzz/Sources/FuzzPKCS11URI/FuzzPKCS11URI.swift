import FuzzSupport
import RelayCore

/// RFC 7512 URIs as `APNS_KEY_*` may hold them (RelayCore `PKCS11URI`): never crash; a refusal is one line that
/// never repeats the query (where a PIN would be); an accepted URI names a key, has no query, and its canonical form
/// parses back to the same URI and prints the same.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPKCS11URI(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    let text = String(decoding: input, as: UTF8.self)
    do {
        let uri = try PKCS11URI(parsing: text, subject: "APNS_KEY_SANDBOX")
        invariant(uri.object != nil || uri.id != nil, "an accepted URI names no key")
        invariant(!text.contains("?"), "a URI with a query was accepted")
        let again = try? PKCS11URI(parsing: uri.description, subject: "APNS_KEY_SANDBOX")
        invariant(again == uri, "the canonical form does not parse back to the same URI")
        invariant(again?.description == uri.description, "the canonical form is not canonical")
        invariant(uri.token.map { $0.utf8.count <= 32 } ?? true, "a token label over 32 bytes")
    } catch {
        let line = error.description
        invariant(!line.contains("\n") && !line.contains("\r"), "a refusal of more than one line")
        if let question = text.firstIndex(of: "?") {
            let query = text[text.index(after: question)...]
            // A query of a few characters may occur in the reason's own words by chance.
            if query.count >= 12 { invariant(!line.contains(query), "a refusal repeats the query") }
        }
    }
    return 0
}

@_cdecl("FuzzPKCS11URI_main")
public func fuzzPKCS11URIMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv, fuzzPKCS11URI)
}
