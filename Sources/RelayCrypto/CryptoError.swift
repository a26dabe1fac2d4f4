/// An error thrown by RelayCrypto: a stable `code` to match on and a human `reason`.
///
/// Two errors are equal when their codes are equal; the reason is for people only. A reason
/// never contains key bytes, plaintext or other secrets.
public struct CryptoError: Error, Equatable, CustomStringConvertible {
    /// The kind of failure. New codes may be added; match on the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// A short stable name for the code, e.g. `"invalidKey"`.
        public let name: String

        private init(_ name: String) { self.name = name }

        /// A key has the wrong size or cannot be used.
        public static let invalidKey = Code("invalidKey")
        /// A nonce has the wrong size.
        public static let invalidNonce = Code("invalidNonce")
        /// Ciphertext, tag, nonce or associated data failed authentication (a tag of the
        /// wrong size included).
        public static let authenticationFailure = Code("authenticationFailure")
        /// A PEM text could not be parsed.
        public static let invalidPEM = Code("invalidPEM")
        /// A key parsed but is not of the expected type (e.g. not an EC P-256 key).
        public static let wrongKeyType = Code("wrongKeyType")
        /// Producing a signature failed.
        public static let signingFailed = Code("signingFailed")
        /// OpenSSL failed in a way the caller cannot fix.
        public static let internalError = Code("internalError")

        public var description: String { name }
    }

    /// What went wrong, to match on.
    public let code: Code
    /// A human explanation, possibly including OpenSSL's error strings; never secrets.
    public let reason: String

    /// Creates an error with a code and a human reason.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public static func == (lhs: CryptoError, rhs: CryptoError) -> Bool { lhs.code == rhs.code }

    public var description: String { "\(code.name): \(reason)" }
}
