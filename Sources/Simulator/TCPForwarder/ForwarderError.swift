import ErrorCodes

/// Why a loopback listener or forwarder could not be set up.
public typealias ForwarderError = ModuleError<ForwarderErrorDomain>

/// The domain of ``ForwarderError``'s codes.
public enum ForwarderErrorDomain {}

extension ErrorCode where Domain == ForwarderErrorDomain {
    /// No socket, or no loopback port to listen on.
    public static var listen: Self { Self("listen") }
}
