import Foundation
import Synchronization

/// The shared heart of an ``HTTP2Client``: the ``PoolStateMachine`` and the running connections
/// behind one lock. `send` hands requests in; connection threads exchange reports for work.
/// Decisions are made under the lock; threads are started and completions called after it.
final class ClientCore: Sendable {
    struct State: ~Copyable {
        var pool: PoolStateMachine
        var connections: [Int: HTTP2ClientConnection] = [:]
    }

    /// What a connection's thread gets back from `exchange`.
    struct Step {
        var deliveries: [PoolStateMachine.Delivery]
        var inbox: [PendingRequest]
        var exit: Bool
        var shutDown: Bool
        var queueDeadline: ContinuousClock.Instant?
    }

    let settings: ClientSettings
    private let state: Mutex<State>

    init(settings: ClientSettings, maxConnections: Int) {
        self.settings = settings
        state = Mutex(State(pool: PoolStateMachine(maxConnections: maxConnections, maxStreams: settings.maxStreams)))
    }

    var statistics: HTTP2ClientStatistics { state.withLock { $0.pool.statistics } }

    var isShutDown: Bool { state.withLock { $0.pool.isShutDown } }

    func submit(_ request: PendingRequest) {
        var started: HTTP2ClientConnection?
        var woken: HTTP2ClientConnection?
        let placement = state.withLock { state -> PoolStateMachine.Placement in
            let placement = state.pool.submit(request, now: .now)
            switch placement {
            case .slot(let id, let wake): if wake { woken = state.connections[id] }
            case .newConnection(let id, let notBefore): started = register(id, notBefore: notBefore, in: &state)
            case .queued, .rejected: break
            }
            return placement
        }
        // The wake-up is a system call that lets the connection's thread run at once: made after
        // unlocking, so that thread does not find the lock still held (see `HTTP2ClientConnection.wake()`).
        woken?.wake()
        started?.start()
        if placement == .rejected {
            request.completion(
                .failure(HTTP2ClientError(.shutdown, "the client was shut down", mayHaveBeenProcessed: false)))
        }
    }

    private func register(_ id: Int, notBefore: ContinuousClock.Instant?, in state: inout State)
        -> HTTP2ClientConnection
    {
        let connection = HTTP2ClientConnection(id: id, core: self, settings: settings, notBefore: notBefore)
        state.connections[id] = connection
        return connection
    }

    /// A connection's thread reports what ended and takes its new requests.
    func exchange(connection: HTTP2ClientConnection, report: PoolStateMachine.Report, now: ContinuousClock.Instant)
        -> Step
    {
        var started: [HTTP2ClientConnection] = []
        var woken: [HTTP2ClientConnection] = []
        let step = state.withLock { state -> Step in
            let effects = state.pool.finish(connection: connection.id, report: report, now: now)
            var deliveries = effects.deliveries
            for request in state.pool.removeExpired(now: now) {
                let error = HTTP2ClientError(.timeout, "no connection in time", mayHaveBeenProcessed: false)
                deliveries.append(PoolStateMachine.Delivery(request: request, result: .failure(error)))
            }
            for id in effects.wake { if let connection = state.connections[id] { woken.append(connection) } }
            for new in effects.start { started.append(register(new.id, notBefore: new.notBefore, in: &state)) }
            if effects.exit { state.connections[connection.id] = nil }
            return Step(
                deliveries: deliveries, inbox: state.pool.takeInbox(of: connection.id), exit: effects.exit,
                shutDown: state.pool.isShutDown, queueDeadline: state.pool.earliestQueuedDeadline)
        }
        for connection in woken { connection.wake() }
        for connection in started { connection.start() }
        return step
    }

    /// A connection's thread leaves at shutdown, having failed `completed` requests.
    func departed(connection: HTTP2ClientConnection, completed: Int) {
        state.withLock { state in
            state.pool.remove(connection: connection.id, completed: completed)
            state.connections[connection.id] = nil
        }
    }

    /// Fails queued requests, tells every connection to fail its own and end, and waits for them.
    func shutDown() {
        let (queued, connections) = state.withLock { state in
            let queued = state.pool.isShutDown ? [] : state.pool.shutDown()
            let connections = Array(state.connections.values)
            for connection in connections { connection.wake() }
            return (queued, connections)
        }
        for request in queued {
            request.completion(
                .failure(HTTP2ClientError(.shutdown, "the client was shut down", mayHaveBeenProcessed: false)))
        }
        for connection in connections { connection.join() }
    }
}
