import ErrorCodes

/// A check of a scenario that did not hold: printed as the one line `doc-test: FAIL: SCENARIO: WHAT`.
struct DocTestFailure: CodedError {
    let code = ErrorCode<DocTestFailure>("failed")
    /// The scenario (`systemd`), or the run's own step (`apns-sim`, `usage`).
    let scenario: String
    /// The step and what was wrong; never a grant, token, password or key.
    let what: String

    var reason: String { "\(scenario): \(what)" }
    var line: String { "doc-test: FAIL: \(reason)" }
}
