import COpenSSL
import OpenSSLSupport

/// An error from starting the APNs simulator or generating its certificates.
///
/// Equality is by ``code`` only; ``reason`` is for people.
public struct SimulatorError: Error, Equatable, CustomStringConvertible {
    /// What went wrong, as an extensible set of codes.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name.
        public let name: String
        init(_ name: String) { self.name = name }

        /// The certificate or private key PEM could not be loaded, or does not match.
        public static let invalidCertificate = Code("invalidCertificate")
        /// OpenSSL failed while generating keys or certificates, or setting up TLS.
        public static let openSSL = Code("openSSL")
        /// The listening socket could not be created, bound or put in listening state.
        public static let bindFailed = Code("bindFailed")
        /// The configured host is neither an IP address nor a resolvable name.
        public static let invalidHost = Code("invalidHost")
        /// The record file could not be opened for appending.
        public static let recordFile = Code("recordFile")
        /// A `--fault` rule is not `PREFIX=OUTCOME` with a hex prefix and a known outcome.
        public static let invalidFault = Code("invalidFault")
        /// A system resource (an event loop, nghttp2 callbacks) could not be created.
        public static let system = Code("system")

        public var description: String { name }
    }

    /// The kind of failure.
    public let code: Code
    /// A human explanation; never contains secrets.
    public let reason: String

    /// Creates an error with a code and a human reason.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public static func == (lhs: SimulatorError, rhs: SimulatorError) -> Bool { lhs.code == rhs.code }

    public var description: String { "\(code.name): \(reason)" }

    /// An OpenSSL failure, with the library's error queue drained into the reason.
    static func openSSL(_ what: String, code: Code = .openSSL) -> SimulatorError {
        let queue = OpenSSLErrorQueue.drain(keeping: .max)
        let detail = queue.isEmpty ? "" : " (\(queue))"
        return SimulatorError(code, what + detail)
    }
}
