import ErrorCodes

/// An error from starting the APNs simulator.
///
/// Equality is by ``code`` only; ``reason`` is for people.
public typealias SimulatorError = ModuleError<SimulatorErrorDomain>

/// The domain of ``SimulatorError``'s codes.
public enum SimulatorErrorDomain {}

extension ErrorCode where Domain == SimulatorErrorDomain {
    /// The certificate or private key PEM could not be loaded, or does not match.
    public static var invalidCertificate: Self { Self("invalidCertificate") }
    /// OpenSSL failed while setting up TLS.
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
