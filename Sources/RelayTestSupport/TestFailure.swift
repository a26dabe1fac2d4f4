/// A test's own failure with a sentence that says what went wrong (a child that did not start, a
/// condition not met in time), for the helpers that cannot call `#expect` themselves.
public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
