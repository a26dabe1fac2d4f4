import ErrorCodes

/// Why a recipe run stopped: a check failed, no container engine works on this machine (container-test), or a
/// signal interrupted the run. A failed check prints one line: `doc-test: FAIL: <scenario>: <what>` or
/// `container-test: FAIL: <what>`.
struct RecipeFailure: CodedError {
    let code: ErrorCode<RecipeFailure>
    /// The doc-test scenario (`systemd`) or step (`apns-sim`) the check belongs to; nil for container-test's
    /// checks and for a tool that did not start (which doc-test names as its own, `doc-test`).
    let scenario: String?
    /// What failed, in the words of the FAIL line; never a grant, token, password or key.
    let what: String
    /// Lines printed before the FAIL line (the tail of a tool's output) to say why; never a secret.
    let detail: String

    init(_ code: ErrorCode<RecipeFailure>, _ what: String, detail: String = "") {
        self.code = code
        self.scenario = nil
        self.what = what
        self.detail = detail
    }

    /// A check of a doc-test scenario that did not hold.
    init(scenario: String, what: String) {
        self.code = .failed
        self.scenario = scenario
        self.what = what
        self.detail = ""
    }

    /// A check that failed.
    static func check(_ what: String, detail: String = "") -> Self { Self(.failed, what, detail: detail) }

    var reason: String { scenario.map { "\($0): \(what)" } ?? what }

    /// doc-test's FAIL line: `doc-test: FAIL: SCENARIO: WHAT`.
    var docTestLine: String { "doc-test: FAIL: \(scenario ?? "doc-test"): \(what)" }
}

extension ErrorCode where Domain == RecipeFailure {
    /// A check failed.
    static var failed: Self { Self("failed") }
    /// No working container engine here: container-test exits 77.
    static var noEngine: Self { Self("no_engine") }
    /// SIGINT or SIGTERM: container-test cleans up and exits 130.
    static var interrupted: Self { Self("interrupted") }
}
