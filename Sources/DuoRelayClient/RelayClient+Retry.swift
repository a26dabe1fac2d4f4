extension RelayClient {
    /// Posts one push, resending it while `policy` says that is safe (see ``RetryPolicy``), and
    /// returns the last outcome. Cancelling the calling task ends the waits.
    public func push(_ push: RelayPush, grant: String, retrying policy: RetryPolicy) async -> PushOutcome {
        var attempt = 1
        while true {
            let outcome = await self.push(push, grant: grant)
            guard let wait = policy.wait(after: outcome, attempt: attempt) else { return outcome }
            do {
                try await Task.sleep(for: wait)
            } catch {
                return outcome
            }
            attempt += 1
        }
    }
}
