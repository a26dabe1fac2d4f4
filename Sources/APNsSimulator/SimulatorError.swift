import ErrorCodes
import TLS

/// An error from starting the APNs simulator or generating its certificates.
///
/// Equality is by ``code`` only; ``reason`` is for people.
public typealias SimulatorError = ModuleError<SimulatorErrorDomain>

/// The domain of ``SimulatorError``'s codes.
public enum SimulatorErrorDomain {}

extension ModuleError where Domain == SimulatorErrorDomain {
    /// An OpenSSL failure, with the library's error queue drained into the reason.
    static func openSSL(_ what: String, code: Code = .openSSL) -> SimulatorError {
        let queue = OpenSSLErrorQueue.drain(keeping: .max)
        let detail = queue.isEmpty ? "" : " (\(queue))"
        return SimulatorError(code, what + detail)
    }
}

extension ErrorCode where Domain == SimulatorErrorDomain {
    /// The certificate or private key PEM could not be loaded, or does not match.
    public static var invalidCertificate: Self { Self("invalidCertificate") }
    /// OpenSSL failed while generating keys or certificates, or setting up TLS.
    public static var openSSL: Self { Self("openSSL") }
    /// The listening socket could not be created, bound or put in listening state.
    public static var bindFailed: Self { Self("bindFailed") }
    /// The configured host is neither an IP address nor a resolvable name.
    public static var invalidHost: Self { Self("invalidHost") }
    /// The record file could not be opened for appending.
    public static var recordFile: Self { Self("recordFile") }
    /// A `--fault` rule is not `PREFIX=OUTCOME` with a hex prefix and a known outcome.
    public static var invalidFault: Self { Self("invalidFault") }
    /// A system resource (an event loop, nghttp2 callbacks) could not be created.
    public static var system: Self { Self("system") }
}
