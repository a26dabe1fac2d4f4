import RelayCrypto

/// What signs an environment's provider tokens: an APNs key in memory (the .p8 text) or one held in a PKCS#11 token,
/// which signs inside the token. Provider tokens, reloads and `check` see only this: the public half (to verify a
/// token, and for the reload's pairing rule: the same key is the same public key) and signatures.
public protocol ProviderTokenSigner: Sendable {
    /// The key's public half.
    var publicKey: P256.Signing.PublicKey { get }
    /// The ES256 signature of a JWT's signing input: the JOSE raw `r ‖ s`, 64 bytes. A key in a token may take tens
    /// of milliseconds, or fail while its token is away; never called on a worker's loop.
    func es256Signature(for signingInput: [UInt8]) throws(CryptoError) -> [UInt8]
}

extension P256.Signing.PrivateKey: ProviderTokenSigner {
    public func es256Signature(for signingInput: [UInt8]) throws(CryptoError) -> [UInt8] {
        try signature(for: signingInput)
    }
}

/// The identity a provider token is signed with: one APNs key, its key id and the team.
public struct ProviderCredentials: Sendable {
    public let keyID: String
    public let teamID: String
    public let signer: any ProviderTokenSigner

    public init(keyID: String, teamID: String, signer: any ProviderTokenSigner) {
        self.keyID = keyID
        self.teamID = teamID
        self.signer = signer
    }

    /// Credentials with a key in memory.
    public init(keyID: String, teamID: String, key: P256.Signing.PrivateKey) {
        self.init(keyID: keyID, teamID: teamID, signer: key)
    }

    /// Signs a token with `iat` = `issuedAt` (Unix seconds, an integer as APNs requires).
    public func sign(issuedAt: UInt64) throws(CryptoError) -> String {
        let header = #"{"alg":"ES256","kid":""# + keyID + #""}"#
        let claims = #"{"iss":""# + teamID + #"","iat":"# + String(issuedAt) + "}"
        let signingInput = Base64.urlEncode(Array(header.utf8)) + "." + Base64.urlEncode(Array(claims.utf8))
        let signature = try signer.es256Signature(for: Array(signingInput.utf8))
        guard signature.count == 64 else {
            throw CryptoError(.signingFailed, "the key gave \(signature.count) bytes, not an ES256 signature's 64")
        }
        return signingInput + "." + Base64.urlEncode(signature)
    }

    /// True when the signer is the same key (the same public key) under the same key id and team.
    public func signsLike(_ other: ProviderCredentials) -> Bool {
        keyID == other.keyID && teamID == other.teamID
            && signer.publicKey.pemRepresentation == other.signer.publicKey.pemRepresentation
    }
}
