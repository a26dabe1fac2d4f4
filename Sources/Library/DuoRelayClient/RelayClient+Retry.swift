extension RelayClient {
    /// Posts one push, resending it while `policy` says that is safe (see ``RetryPolicy``), and
    /// returns the last outcome. Cancelling the calling task ends the waits.
    ///
    /// `timeout` (the client's when nil) is the deadline of the whole call, every send and every
    /// wait included: each send gets what is left of it, a wait that would pass it is not waited
    /// (the last outcome is returned), and a send cut short by it is `.failed(mayHaveBeenDelivered: true)`.
    /// A wait that overruns it (a busy machine) sends nothing more: the outcome before the wait is returned.
    public func push(
        _ push: RelayPush, grant: String, retrying policy: RetryPolicy, timeout: Duration? = nil
    ) async -> PushOutcome {
        let deadline = ContinuousClock.now + (timeout ?? self.timeout)
        var attempt = 1
        var outcome = await self.push(push, grant: grant, timeout: ContinuousClock.now.duration(to: deadline))
        while let wait = policy.wait(after: outcome, attempt: attempt), ContinuousClock.now + wait < deadline {
            do {
                try await Task.sleep(for: wait)
            } catch {
                return outcome
            }
            // Not a send with no time left: that would answer `.failed(mayHaveBeenDelivered: false)` in place of
            // an earlier send's answer (a 502 the relay gave after a send to APNs that may have arrived).
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return outcome }
            attempt += 1
            outcome = await self.push(push, grant: grant, timeout: left)
        }
        return outcome
    }
}
