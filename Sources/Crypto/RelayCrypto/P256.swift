/// The NIST P-256 curve (secp256r1, "prime256v1"); see `P256.Signing`.
public enum P256 {
    /// ECDSA over P-256 with SHA-256 (JOSE "ES256"). Signatures are the raw 64-byte r‖s form
    /// that JWS uses, not DER.
    public enum Signing {}
}
