import EventLoops

/// A measurement's run on its event loop (closed loop, open loop, idle connections, minting grants): the connections
/// it owns and its one end, after which nothing it hears counts.
protocol LoadRun: ClientConnectionOwner {
    associatedtype Value
    /// The run's connections, each closed at the end.
    var pool: [ClientConnection] { get }
    /// Set once, by ``end(_:)``.
    var finished: Bool { get set }
    /// Hands the result to ``LoadLoop``.
    var finish: (Result<Value, LoadError>) -> Void { get }
    /// Closes the run's timers; called once, at the end.
    func closeTimers()
}

extension LoadRun {
    /// Ends the run with `result` unless it has ended: timers and connections closed, then the result handed on.
    func end(_ result: Result<Value, LoadError>) {
        guard !finished else { return }
        finished = true
        closeTimers()
        for client in pool { client.close() }
        finish(result)
    }

    /// A connection that cannot be made ends the run (idle connections count it instead).
    func client(_ client: ClientConnection, didFailToConnect error: LoopError) {
        end(.failure(LoadError(.failed, "cannot connect: \(error.reason)")))
    }
}
