extension RelayClient {
    /// Posts one push, resending it while `policy` says that is safe (see ``RetryPolicy``), and
    /// returns the last outcome. Cancelling the calling task ends the waits.
    ///
    /// `timeout` (the client's when nil) is the deadline of the whole call, every send and every
    /// wait included: each send gets what is left of it, a wait that would pass it is not waited
    /// (the last outcome is returned), and a send cut short by it is `.failed(mayHaveBeenDelivered: true)`.
    public func push(
        _ push: RelayPush, grant: String, retrying policy: RetryPolicy, timeout: Duration? = nil
    ) async -> PushOutcome {
        let deadline = ContinuousClock.now + (timeout ?? self.timeout)
        var attempt = 1
        while true {
            let outcome = await self.push(push, grant: grant, timeout: ContinuousClock.now.duration(to: deadline))
            guard let wait = policy.wait(after: outcome, attempt: attempt),
                ContinuousClock.now + wait < deadline
            else { return outcome }
            do {
                try await Task.sleep(for: wait)
            } catch {
                return outcome
            }
            attempt += 1
        }
    }
}
