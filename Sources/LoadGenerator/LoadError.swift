/// A problem that stops a subcommand: a code and a reason for standard error.
struct LoadError: Error, Equatable {
    struct Code: Equatable {
        let name: String
        /// The command line is wrong (exit 64).
        static let usage = Code(name: "usage")
        /// The target did not answer as expected, or a file could not be used (exit 1).
        static let failed = Code(name: "failed")
    }

    let code: Code
    let reason: String

    init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    static func == (lhs: LoadError, rhs: LoadError) -> Bool { lhs.code == rhs.code }
}
