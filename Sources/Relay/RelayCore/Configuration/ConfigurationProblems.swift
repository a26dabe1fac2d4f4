import ErrorCodes

/// Every problem found in a configuration and its secrets, in the order found: what `check` reports, one line
/// each. Never empty. Its code is the first problem's; two are equal when every problem is.
public struct ConfigurationProblems: CodedError, Sendable {
    public let all: [ConfigurationError]

    /// The first problem's code.
    public var code: ConfigurationError.Code { first.code }

    /// Every problem, one after the other, as `check` prints them one a line.
    public var reason: String { all.map(\.description).joined(separator: "; ") }

    public static func == (lhs: ConfigurationProblems, rhs: ConfigurationProblems) -> Bool { lhs.all == rhs.all }

    public func hash(into hasher: inout Hasher) {
        for problem in all { hasher.combine(problem) }
    }

    public init(_ first: ConfigurationError, _ more: [ConfigurationError] = []) {
        all = [first] + more
    }

    /// Nil when `problems` is empty.
    public init?(_ problems: [ConfigurationError]) {
        guard let first = problems.first else { return nil }
        self.init(first, Array(problems.dropFirst()))
    }

    /// What a reader that stops at the first problem reports.
    public var first: ConfigurationError { all[0] }

    /// Gathers problems while a reader carries on past each one. A class, not a value: a check that runs inside
    /// `attempt` adds problems of its own (a block's keys inside the block's attempt), which a mutating method
    /// of a struct would forbid as overlapping access. It lives on one thread, inside one check.
    final class Collector {
        private(set) var problems: [ConfigurationError] = []

        func add(_ more: [ConfigurationError]) { problems.append(contentsOf: more) }

        func add(_ problem: ConfigurationError) { problems.append(problem) }

        /// Runs `body`, keeping its problem if it throws one.
        func attempt(_ body: () throws(ConfigurationError) -> Void) {
            do { try body() } catch { problems.append(error) }
        }

    }
}
