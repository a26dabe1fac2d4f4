import ErrorCodes

/// Why `container-test` stopped: a check failed (its reason is the one line `container-test: FAIL: <what>`), no
/// container engine works on this machine, or a signal interrupted the run.
struct ContainerTestFailure: CodedError {
    let code: ErrorCode<ContainerTestFailure>
    /// What failed, in the words of the FAIL line; never a secret.
    let reason: String
    /// Lines printed before the FAIL line (the tail of a tool's output) to say why; never a secret.
    let detail: String

    init(_ code: ErrorCode<ContainerTestFailure>, _ reason: String, detail: String = "") {
        self.code = code
        self.reason = reason
        self.detail = detail
    }

    /// A check that failed.
    static func check(_ what: String, detail: String = "") -> Self { Self(.failed, what, detail: detail) }
}

extension ErrorCode where Domain == ContainerTestFailure {
    /// A check failed.
    static var failed: Self { Self("failed") }
    /// No working container engine here: the run exits 77.
    static var noEngine: Self { Self("no_engine") }
    /// SIGINT or SIGTERM: the run cleans up and exits 130.
    static var interrupted: Self { Self("interrupted") }
}
