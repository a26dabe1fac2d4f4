import ErrorCodes

/// A problem that stops a subcommand: a code and a reason for standard error.
typealias LoadError = ModuleError<LoadErrorDomain>

/// The domain of ``LoadError``'s codes.
enum LoadErrorDomain {}

extension ErrorCode where Domain == LoadErrorDomain {
    /// The command line is wrong (exit 64).
    static var usage: Self { Self("usage") }
    /// The target did not answer as expected, or a file could not be used (exit 1).
    static var failed: Self { Self("failed") }
}
