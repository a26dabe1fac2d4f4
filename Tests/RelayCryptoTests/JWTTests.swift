import Foundation
import RelayCrypto
import Testing

@Suite("JWT ES256")
struct JWTTests {
    static let header = #"{"alg":"ES256","kid":"ABC123DEFG"}"#
    static let claims = #"{"iss":"DEF123GHIJ","iat":1700000000}"#

    @Test("sign, decode and verify round trip")
    func roundTrip() throws {
        let key = P256.Signing.PrivateKey()
        let token = try JWT.signES256(header: Self.header, claims: Self.claims, using: key)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(!token.contains("=") && !token.contains("+") && !token.contains("/"))
        #expect(parts[0] == "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyM0RFRkcifQ")

        let decoded = try #require(JWT.decode(token))
        #expect(decoded.header == Array(Self.header.utf8))
        #expect(decoded.claims == Array(Self.claims.utf8))
        #expect(decoded.signingInput == Array("\(parts[0]).\(parts[1])".utf8))
        #expect(decoded.signature.count == 64)
        #expect(key.publicKey.isValidSignature(decoded.signature, for: decoded.signingInput))

        #expect(JWT.verifyES256(token, using: key.publicKey))
        #expect(JWT.verifyES256(token[...], using: key.publicKey))
        #expect(!JWT.verifyES256(token, using: P256.Signing.PrivateKey().publicKey))
    }

    @Test("changing any character of the token makes verification fail")
    func everyCharacterMatters() throws {
        let key = P256.Signing.PrivateKey()
        let token = Array(try JWT.signES256(header: Self.header, claims: Self.claims, using: key).utf8)
        #expect(JWT.verifyES256(String(decoding: token, as: UTF8.self), using: key.publicKey))
        for index in token.indices {
            for replacement in ["A", "B", "g", "_", ".", "="].map({ UInt8(ascii: $0) })
            where replacement != token[index] {
                var changed = token
                changed[index] = replacement
                let text = String(decoding: changed, as: UTF8.self)
                #expect(!JWT.verifyES256(text, using: key.publicKey), "changed index \(index)")
            }
        }
        // Added or removed characters fail too.
        let text = String(decoding: token, as: UTF8.self)
        #expect(!JWT.verifyES256(text + "A", using: key.publicKey))
        #expect(!JWT.verifyES256(String(text.dropLast()), using: key.publicKey))
        #expect(!JWT.verifyES256(" " + text, using: key.publicKey))
    }

    /// The JWT signing input for `header` and `claims`, signed by the openssl command with a fresh key: the
    /// input, openssl's DER signature, and the key's public half.
    static func openSSLSignature() throws -> (signingInput: String, der: [UInt8], publicKey: P256.Signing.PublicKey) {
        let tool = try OpenSSLTool()
        try tool.succeed(P256SigningTests.p256Arguments)
        try tool.succeed(["pkey", "-in", "key.pem", "-pubout", "-out", "pub.pem"])
        let signingInput = Base64.urlEncode(Array(Self.header.utf8)) + "." + Base64.urlEncode(Array(Self.claims.utf8))
        try tool.write("input", signingInput)
        try tool.succeed(["dgst", "-sha256", "-sign", "key.pem", "-out", "sig.der", "input"])
        let publicKey = try P256.Signing.PublicKey(pemRepresentation: try tool.readText("pub.pem"))
        return (signingInput, try tool.read("sig.der"), publicKey)
    }

    @Test("a token signed by the openssl command verifies")
    func openSSLSignedToken() throws {
        let (signingInput, der, publicKey) = try Self.openSSLSignature()
        let raw = try #require(DERSignature.decodeToRaw(der))
        #expect(JWT.verifyES256(signingInput + "." + Base64.urlEncode(raw), using: publicKey))
    }

    @Test("a DER-encoded signature is not accepted in place of raw r||s")
    func derSignatureRejected() throws {
        let (signingInput, der, publicKey) = try Self.openSSLSignature()
        #expect(!JWT.verifyES256(signingInput + "." + Base64.urlEncode(der), using: publicKey))
        #expect(!publicKey.isValidSignature(der, for: Array(signingInput.utf8)))
        let raw = try #require(DERSignature.decodeToRaw(der))
        #expect(JWT.verifyES256(signingInput + "." + Base64.urlEncode(raw), using: publicKey))
    }

    @Test("a header that does not declare ES256 is refused even with a valid signature")
    func algorithmMustBeES256() throws {
        let key = P256.Signing.PrivateKey()
        for header in [#"{"alg":"HS256"}"#, #"{"kid":"X"}"#, "[]", "not json", #"{"alg":"none"}"#] {
            let token = try JWT.signES256(header: header, claims: Self.claims, using: key)
            #expect(JWT.decode(token) != nil)
            #expect(!JWT.verifyES256(token, using: key.publicKey), "header \(header)")
        }
    }

    @Test(
        "malformed tokens do not decode",
        arguments: [
            "", ".", "..", "a.b", "a.b.c.d", ".eyJ9.AAAA", "eyJ9..AAAA", "eyJ9.eyJ9.AAA=", "eyJ9.eyJ9.A",
            "eyJ9=.eyJ9.AAAA", "eyJ9.eyJ9.AA AA", "eyJ9.eyJ9.AA+A", "eyJ9.eyJ9.AAAA.",
        ])
    func malformed(_ token: String) {
        #expect(JWT.decode(token) == nil)
        #expect(!JWT.verifyES256(token, using: P256.Signing.PrivateKey().publicKey))
    }

    @Test("decode accepts a well-formed token without checking its signature")
    func decodeWithoutVerifying() throws {
        let decoded = try #require(JWT.decode("e30.eyJ9.AAAA"))
        #expect(decoded.header == Array("{}".utf8))
        #expect(decoded.claims == Array("{\"}".utf8))
        #expect(decoded.signingInput == Array("e30.eyJ9".utf8))
        #expect(decoded.signature == [0, 0, 0])
    }
}
