import ErrorCodes

/// Why an ``HTTPServer`` could not start. Equality compares codes only.
public typealias HTTPServerError = ModuleError<HTTPServerErrorDomain>

/// The domain of ``HTTPServerError``'s codes.
public enum HTTPServerErrorDomain {}

extension ErrorCode where Domain == HTTPServerErrorDomain {
    /// A configuration value is out of range (the reason names it).
    public static var invalidConfiguration: Self { Self("invalidConfiguration") }
    /// The listening socket could not be opened or bound (the reason names the address and port).
    public static var bindFailed: Self { Self("bindFailed") }
    /// A server thread could not start.
    public static var startFailed: Self { Self("startFailed") }
}
