import Foundation

/// Compact JSON Web Tokens (RFC 7519) signed with ES256 (RFC 7518 §3.4), as APNs
/// token authentication uses them.
public enum JWT {
    /// Signs a token: `base64url(header) + "." + base64url(claims) + "." + base64url(r‖s)`.
    ///
    /// `header` and `claims` are JSON texts, used byte for byte (this function does not
    /// check or reformat them); the header should say `"alg":"ES256"`.
    public static func signES256(header: String, claims: String, using key: P256.Signing.PrivateKey)
        throws(CryptoError) -> String
    {
        let signingInput = Base64.urlEncode(Array(header.utf8)) + "." + Base64.urlEncode(Array(claims.utf8))
        let signature = try key.signature(for: Array(signingInput.utf8))
        return signingInput + "." + Base64.urlEncode(signature)
    }

    /// A compact token split into its parts, not verified.
    public struct Parts: Sendable, Equatable {
        /// The decoded header (JSON bytes).
        public var header: [UInt8]
        /// The decoded claims (JSON bytes).
        public var claims: [UInt8]
        /// What the signature signs: the ASCII text up to the second dot.
        public var signingInput: [UInt8]
        /// The decoded signature, of any length.
        public var signature: [UInt8]
    }

    /// Splits a compact token without verifying it: nil unless the token has exactly three
    /// parts, each canonical base64url without padding, with a non-empty header and claims.
    /// The signature may be of any length here.
    public static func decode(_ token: some StringProtocol) -> Parts? {
        let bytes = Array(token.utf8)
        guard let firstDot = bytes.firstIndex(of: dot),
            let secondDot = bytes[(firstDot + 1)...].firstIndex(of: dot),
            !bytes[(secondDot + 1)...].contains(dot),
            firstDot > 0, secondDot > firstDot + 1
        else { return nil }
        guard let header = Base64.urlDecode(bytes[..<firstDot]),
            let claims = Base64.urlDecode(bytes[(firstDot + 1)..<secondDot]),
            let signature = Base64.urlDecode(bytes[(secondDot + 1)...])
        else { return nil }
        return Parts(header: header, claims: claims, signingInput: Array(bytes[..<secondDot]), signature: signature)
    }

    /// True only if the token is well formed, its header is a JSON object whose `alg` is
    /// `"ES256"`, and its signature is a valid 64-byte r‖s ES256 signature of the signing
    /// input by `key`. Claims (such as `iat`) are not checked.
    public static func verifyES256(_ token: some StringProtocol, using key: P256.Signing.PublicKey) -> Bool {
        guard let parts = decode(token), parts.signature.count == OpenSSLKey.rawSignatureByteCount else {
            return false
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(parts.header)) as? [String: Any],
            object["alg"] as? String == "ES256"
        else { return false }
        return key.isValidSignature(parts.signature, for: parts.signingInput)
    }

    private static let dot = UInt8(ascii: ".")
}
