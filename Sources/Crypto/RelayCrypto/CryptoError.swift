import ErrorCodes

/// An error thrown by RelayCrypto: a stable `code` to match on and a human `reason`.
///
/// Two errors are equal when their codes are equal; the reason is for people only. A reason
/// never contains key bytes, plaintext or other secrets.
public typealias CryptoError = ModuleError<CryptoErrorDomain>

/// The domain of ``CryptoError``'s codes.
public enum CryptoErrorDomain {}

extension ErrorCode where Domain == CryptoErrorDomain {
    /// A key has the wrong size or cannot be used.
    public static var invalidKey: Self { Self("invalidKey") }
    /// A nonce has the wrong size.
    public static var invalidNonce: Self { Self("invalidNonce") }
    /// Ciphertext, tag, nonce or associated data failed authentication (a tag of the
    /// wrong size included).
    public static var authenticationFailure: Self { Self("authenticationFailure") }
    /// A PEM text could not be parsed.
    public static var invalidPEM: Self { Self("invalidPEM") }
    /// A key parsed but is not of the expected type (e.g. not an EC P-256 key).
    public static var wrongKeyType: Self { Self("wrongKeyType") }
    /// Producing a signature failed.
    public static var signingFailed: Self { Self("signingFailed") }
    /// OpenSSL failed in a way the caller cannot fix.
    public static var internalError: Self { Self("internalError") }
}
