import EventLoops
import MonotonicTime
import Synchronization

/// The heart of an ``HTTP2Client`` on its event loop: the ``PoolStateMachine`` and the connections,
/// owned by the loop's thread (no lock). `send` hands requests in (on the loop, or through
/// `EventLoop.execute`); connections hand in their reports; the core carries out what the pool answers
/// (makes connections, gives them requests, calls completions) in the same turn.
///
/// Re-entrancy: a completion may call `send` (or `shutdown`) at once. Reports and completions wait in
/// two queues that one `drain` empties, so the pool's decisions are applied one at a time, each on a
/// pool whose last decision is fully carried out.
final class ClientCore: @unchecked Sendable {
    // @unchecked: every stored property but `counters` and `isShutDown` is used on `loop`'s thread only
    // (each entry point checks it or hops there); those two are atomics, read from any thread.

    let loop: EventLoop
    let settings: ClientSettings
    private var pool: PoolStateMachine
    private var connections: [Int: HTTP2ClientConnection] = [:]
    /// Connections whose report waits for `drain`.
    private var reports: [HTTP2ClientConnection] = []
    /// Completions that wait for `drain`.
    private var deliveries: [PoolStateMachine.Delivery] = []
    private var draining = false
    /// Fails requests that waited in the pool's queue past their deadline, and gives waiting requests to a new
    /// connection whose one request outlasted the pool's probe bound.
    private var queueTimer: LoopTimer?

    /// The statistics, published after every change for readers on any thread.
    private let counters = Counters()
    /// Set once `shutdown` has begun (read by `send` on any thread).
    private let shutDownFlag = Atomic<Bool>(false)

    private final class Counters: Sendable {
        let opened = Atomic<Int>(0)
        let replaced = Atomic<Int>(0)
        let open = Atomic<Int>(0)
        let retries = Atomic<Int>(0)
        /// Accepted by `send` and not completed: counted from `send` on, on whatever thread it ran.
        let inFlight = Atomic<Int>(0)
    }

    init(settings: ClientSettings, maxConnections: Int, loop: EventLoop) {
        self.settings = settings
        self.loop = loop
        pool = PoolStateMachine(maxConnections: maxConnections, maxStreams: settings.maxStreams)
    }

    var statistics: HTTP2ClientStatistics {
        HTTP2ClientStatistics(
            connectionsOpened: counters.opened.load(ordering: .relaxed),
            connectionsReplaced: counters.replaced.load(ordering: .relaxed),
            connectionsOpen: counters.open.load(ordering: .relaxed),
            requestsInFlight: counters.inFlight.load(ordering: .relaxed),
            retries: counters.retries.load(ordering: .relaxed))
    }

    var isShutDown: Bool { shutDownFlag.load(ordering: .relaxed) }

    /// `send` accepted a request (any thread): it counts as in flight until its completion is called.
    func accepted() {
        counters.inFlight.add(1, ordering: .relaxed)
    }

    /// Completes a request that never reached the pool (the loop had stopped).
    func rejected(_ request: PendingRequest) {
        counters.inFlight.subtract(1, ordering: .relaxed)
        request.completion(PoolStateMachine.shutDownDelivery(of: request).result)
    }

    // MARK: On the loop

    /// A request from `send`.
    func submit(_ request: PendingRequest) {
        switch pool.submit(request, now: EventLoop.monotonicNow()) {
        case .connection(let id):
            connections[id]?.accept(request)
        case .newConnection(let id, let notBefore):
            start(id, notBefore: notBefore)?.accept(request)
        case .queued:
            armQueueTimer()
        case .rejected:
            deliveries.append(PoolStateMachine.shutDownDelivery(of: request))
        }
        drain()
    }

    /// A connection's machine has news for the pool.
    func connectionHasReport(_ connection: HTTP2ClientConnection) {
        reports.append(connection)
        drain()
    }

    private func start(_ id: Int, notBefore: Instant?) -> HTTP2ClientConnection? {
        let connection = HTTP2ClientConnection(id: id, core: self, notBefore: notBefore)
        connections[id] = connection
        connection.begin()
        return connections[id]
    }

    /// Applies the pool's decisions for every waiting report, then calls the waiting completions, until
    /// both queues are empty; then publishes the statistics.
    private func drain() {
        guard !draining else { return }
        draining = true
        while true {
            if !reports.isEmpty {
                let connection = reports.removeFirst()
                apply(connection.takeReport(), of: connection)
                continue
            }
            if !deliveries.isEmpty {
                var batch: [PoolStateMachine.Delivery] = []
                swap(&batch, &deliveries)
                for delivery in batch {
                    counters.inFlight.subtract(1, ordering: .relaxed)
                    delivery.request.completion(delivery.result)
                }
                continue
            }
            break
        }
        draining = false
        publish()
    }

    private func apply(_ report: PoolStateMachine.Report, of connection: HTTP2ClientConnection) {
        if let onEvent = settings.onEvent { for event in report.events { onEvent(event) } }
        guard connections[connection.id] === connection else {
            // Not the pool's any more (shut down): what ended here ends for good.
            deliveries.append(contentsOf: report.results.map(PoolStateMachine.delivery(of:)))
            return
        }
        run(pool.finish(connection: connection.id, report: report, now: EventLoop.monotonicNow()), of: connection)
    }

    /// Carries out what the pool decided: `connection` (the one that reported, if any) closes when it exits.
    private func run(_ effects: PoolStateMachine.Effects, of connection: HTTP2ClientConnection? = nil) {
        if effects.exit, let connection {
            connections[connection.id] = nil
            connection.close(graceful: true)
        }
        for new in effects.start {
            let started = start(new.id, notBefore: new.notBefore)
            if let first = new.first { started?.accept(first) }
        }
        for assignment in effects.assignments { connections[assignment.connection]?.accept(assignment.request) }
        deliveries.append(contentsOf: effects.deliveries)
        armQueueTimer()
    }

    private func publish() {
        let statistics = pool.statistics
        counters.opened.store(statistics.connectionsOpened, ordering: .relaxed)
        counters.replaced.store(statistics.connectionsReplaced, ordering: .relaxed)
        counters.open.store(statistics.connectionsOpen, ordering: .relaxed)
        counters.retries.store(statistics.retries, ordering: .relaxed)
    }

    /// Schedules the queue's timer for the pool's next wake-up, unless it is due before that already.
    private func armQueueTimer() {
        guard let next = pool.nextWakeUp else { return }
        let timer = queueTimer ?? LoopTimer(on: loop) { [self] in queueTimerFired() }
        queueTimer = timer
        timer.schedule(noLaterThan: next)
    }

    private func queueTimerFired() {
        run(pool.timerFired(now: EventLoop.monotonicNow()))
        drain()
    }

    /// Fails queued and in-flight requests with `.shutdown` and closes every connection.
    func shutDown() {
        loop.preconditionCurrent()
        guard !pool.isShutDown else { return }
        shutDownFlag.store(true, ordering: .relaxed)
        deliveries.append(contentsOf: pool.shutDown().map(PoolStateMachine.shutDownDelivery(of:)))
        let closing = connections.keys.sorted().compactMap { connections[$0] }
        connections = [:]
        for connection in closing {
            deliveries.append(contentsOf: connection.shutDown().map(PoolStateMachine.delivery(of:)))
        }
        queueTimer?.close()
        queueTimer = nil
        drain()
    }
}
