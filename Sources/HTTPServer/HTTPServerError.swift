/// Why an ``HTTPServer`` could not start. Equality compares codes only.
public struct HTTPServerError: Error, Equatable, CustomStringConvertible {
    /// What went wrong, in a form code can test.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String

        /// A configuration value is out of range (the reason names it).
        public static let invalidConfiguration = Code(name: "invalidConfiguration")
        /// The listening socket could not be opened or bound (the reason names the address and port).
        public static let bindFailed = Code(name: "bindFailed")
        /// A server thread could not start.
        public static let startFailed = Code(name: "startFailed")

        public var description: String { name }
    }

    /// The kind of failure.
    public let code: Code
    /// A human explanation, safe to print (it contains only operator configuration, never client data).
    public let reason: String

    /// Creates an error.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code): \(reason)" }

    public static func == (lhs: HTTPServerError, rhs: HTTPServerError) -> Bool {
        lhs.code == rhs.code
    }
}
