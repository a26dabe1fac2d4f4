import ErrorCodes

/// A test's own failure with a sentence that says what went wrong (a child that did not start, a
/// condition not met in time), for the helpers that cannot call `#expect` themselves.
public struct TestFailure: CodedError {
    public let code = ErrorCode<TestFailure>("test_failure")
    public let reason: String
    public init(_ reason: String) { self.reason = reason }

    /// The sentence alone: a test prints it as its failure.
    public var description: String { reason }
}
