import CMicroHTTPD

/// A head decision that comes later (``HeadDecision/later(_:)``): the request waits suspended, then MHD calls the
/// access handler again for its head, which `start()` answers with the decision.
extension RequestContext {
    enum HeadWait {
        /// Suspended until the decision comes: stage stays `.awaitingHead`, so the call after the resume comes back
        /// to `start()`.
        case suspended
        /// The server is stopping: close.
        case stopping
        /// It had already come.
        case decided(HeadDecision)
    }

    /// Takes the decision if it has already come; otherwise suspends the connection until it does.
    func waitForDecision(_ pending: PendingHeadDecision) -> HeadWait {
        var stopping = false
        let connection = self.connection
        let decided = pending.take(orWaitWith: self) {
            core.suspended.withLock { registry in
                if registry.stopping {
                    stopping = true
                    return false
                }
                shared.withLock { state in
                    MHD_suspend_connection(connection)
                    state.phase = .suspended
                }
                registry.contexts[ObjectIdentifier(self)] = self
                return true
            }
        }
        if let decided { return .decided(decided) }
        if stopping { return .stopping }
        stage = .awaitingHead
        pendingDecision = pending
        return .suspended
    }

    /// Leaves the suspended state after a resume and gives the decision (nil: the server is stopping).
    func resumedWithDecision(_ pending: PendingHeadDecision) -> HeadDecision? {
        pendingDecision = nil
        core.suspended.withLock { _ = $0.contexts.removeValue(forKey: ObjectIdentifier(self)) }
        shared.withLock { $0.phase = .worker }
        return pending.taken()
    }
}
