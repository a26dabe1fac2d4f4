/// The client's scheduling decisions, as a pure state machine (no threads, no I/O): which
/// connection takes a request, when a connection opens up, is retired or replaced, which
/// failed request is retried. ``ClientCore`` keeps it behind its lock and acts on the effects.
///
/// Rules (DESIGN.md, "The APNs request" and "Lifecycle"):
/// - A new connection carries one request at a time until it has answered anything but 403;
///   then it takes up to `maxStreams` requests at once.
/// - A request goes to the least-loaded connection with room; without one, a new connection
///   is started if fewer than `maxConnections` are open, else the request waits in the queue.
/// - A retired connection takes no new requests; it leaves when its last request is done.
/// - A request the server certainly did not process is retried once, on another connection,
///   if its deadline has not passed.
struct DispatchState: Sendable {
    enum Phase: Sendable, Equatable {
        /// New: one request at a time until an answer other than 403.
        case probing
        /// Up to `maxStreams` requests at once.
        case open
        /// Takes no new requests; leaves once empty.
        case retired
    }

    struct Slot: Sendable {
        let id: Int
        var phase: Phase = .probing
        /// Requests given to this connection and not finished (in its inbox or on the wire).
        var assigned = 0
        /// Requests handed over and not yet picked up by the connection's thread.
        var inbox: [PendingRequest] = []
        /// A wake-up is on its way to the connection's thread.
        var wakeRequested = false
        /// Its TLS connection has been up (a request reached the point of being sent).
        var established = false
    }

    /// Where `place` put a request.
    enum Placement: Sendable, Equatable {
        /// In the inbox of a running connection; `wake` when its thread needs a wake-up.
        case slot(id: Int, wake: Bool)
        /// In the inbox of a new connection, whose thread the caller must start.
        case newConnection(id: Int)
        /// In the queue, until a connection has room.
        case queued
        /// Refused: the client is shut down.
        case rejected
    }

    /// What a connection's thread tells after a round of work.
    struct Report: Sendable {
        /// Requests that ended, with their outcome.
        var results: [(request: PendingRequest, result: Result<HTTP2Response, HTTP2ClientError>)] = []
        /// The connection's TLS connection has been up.
        var established = false
        /// An answer other than HTTP 403 arrived.
        var answeredOtherThan403 = false
        /// The connection is no longer usable (GOAWAY, reset, silent, failed to connect).
        var retire = false
    }

    /// What the caller must do after `finish`.
    struct Effects: Sendable {
        /// Completions to call, outside the lock.
        var deliveries: [(request: PendingRequest, result: Result<HTTP2Response, HTTP2ClientError>)] = []
        /// Connections whose threads need a wake-up (a retry was put in their inbox).
        var wake: [Int] = []
        /// New connections whose threads must be started.
        var start: [Int] = []
        /// The reporting connection is retired and empty: it was removed and its thread ends.
        var exit = false
    }

    let maxConnections: Int
    let maxStreams: Int
    private(set) var slots: [Slot] = []
    private(set) var queue = RequestQueue()
    private(set) var isShutDown = false
    private var nextID = 0
    private var counters = HTTP2ClientStatistics()

    init(maxConnections: Int, maxStreams: Int) {
        self.maxConnections = maxConnections
        self.maxStreams = maxStreams
    }

    var statistics: HTTP2ClientStatistics {
        var result = counters
        result.connectionsOpen = liveCount
        return result
    }

    private var liveCount: Int { slots.reduce(0) { $0 + ($1.phase == .retired ? 0 : 1) } }

    private func capacity(_ slot: Slot) -> Int {
        switch slot.phase {
        case .probing: 1
        case .open: maxStreams
        case .retired: 0
        }
    }

    private func index(of id: Int) -> Int? { slots.firstIndex { $0.id == id } }

    /// Accepts a new request from `send`.
    mutating func submit(_ request: PendingRequest) -> Placement {
        guard !isShutDown else { return .rejected }
        counters.requestsInFlight += 1
        return place(request, excluding: nil, front: false)
    }

    private mutating func place(_ request: PendingRequest, excluding: Int?, front: Bool) -> Placement {
        var best: Int?
        for i in slots.indices where slots[i].id != excluding && slots[i].assigned < capacity(slots[i]) {
            if best == nil || slots[i].assigned < slots[best!].assigned { best = i }
        }
        if let i = best {
            slots[i].inbox.append(request)
            slots[i].assigned += 1
            let wake = !slots[i].wakeRequested
            slots[i].wakeRequested = true
            return .slot(id: slots[i].id, wake: wake)
        }
        if liveCount < maxConnections {
            return .newConnection(id: startConnection(with: request))
        }
        if front { queue.prepend(request) } else { queue.append(request) }
        return .queued
    }

    private mutating func startConnection(with request: PendingRequest) -> Int {
        nextID += 1
        counters.connectionsOpened += 1
        var slot = Slot(id: nextID)
        slot.inbox = [request]
        slot.assigned = 1
        slot.wakeRequested = true
        slots.append(slot)
        return nextID
    }

    /// Hands a connection's thread the requests given to it since its last call.
    mutating func takeInbox(of id: Int) -> [PendingRequest] {
        guard let i = index(of: id) else { return [] }
        slots[i].wakeRequested = false
        let inbox = slots[i].inbox
        slots[i].inbox = []
        return inbox
    }

    /// Records a connection's round of work; returns what the caller must do.
    mutating func finish(connection id: Int, report: Report, now: ContinuousClock.Instant) -> Effects {
        var effects = Effects()
        guard let i = index(of: id) else { return effects }
        slots[i].assigned -= report.results.count
        if report.established { slots[i].established = true }
        if report.answeredOtherThan403 && slots[i].phase == .probing { slots[i].phase = .open }
        var orphans: [PendingRequest] = []
        if report.retire && slots[i].phase != .retired {
            slots[i].phase = .retired
            counters.connectionsReplaced += 1
            // Requests handed over but not picked up yet go elsewhere, untried.
            orphans = slots[i].inbox
            slots[i].inbox = []
            slots[i].assigned -= orphans.count
        }

        var retries: [PendingRequest] = []
        var connectFailure: HTTP2ClientError?
        for (request, result) in report.results {
            if case .failure(let error) = result {
                if !slots[i].established && (error.code == .connectFailed || error.code == .tls) {
                    connectFailure = error
                }
                if !isShutDown && Self.isRetryable(error) && request.attempt == 0 && now < request.deadline {
                    retries.append(request.retried())
                    counters.retries += 1
                    continue
                }
            }
            effects.deliveries.append((request, result))
        }

        // The origin is unreachable and no connection works: fail the waiting requests now
        // rather than letting each of them try a connection of its own.
        if let failure = connectFailure, !slots.contains(where: { $0.phase != .retired && $0.established }) {
            for request in queue.removeAll() {
                let error = HTTP2ClientError(
                    failure.code, "no connection to the origin: \(failure.reason)", mayHaveBeenProcessed: false)
                effects.deliveries.append((request, .failure(error)))
            }
        }

        for request in retries + orphans {
            switch place(request, excluding: id, front: true) {
            case .slot(let target, let wake): if wake { effects.wake.append(target) }
            case .newConnection(let target): effects.start.append(target)
            case .queued, .rejected: break
            }
        }

        if let i = index(of: id) {
            // Take waiting requests while this connection has room.
            while slots[i].assigned < capacity(slots[i]), let next = queue.popFirst() {
                slots[i].inbox.append(next)
                slots[i].assigned += 1
            }
        }
        // Replace retired connections while requests wait.
        while !queue.isEmpty && liveCount < maxConnections, let next = queue.popFirst() {
            effects.start.append(startConnection(with: next))
        }
        counters.requestsInFlight -= effects.deliveries.count

        if let i = index(of: id), slots[i].phase == .retired && slots[i].assigned == 0 {
            slots.remove(at: i)
            effects.exit = true
        }
        return effects
    }

    /// A failure the server certainly did not see, worth one more try on another connection.
    static func isRetryable(_ error: HTTP2ClientError) -> Bool {
        guard !error.mayHaveBeenProcessed else { return false }
        return [.refused, .connectionLost, .connectFailed, .tls].contains(error.code)
    }

    /// Removes the queued requests whose deadline has passed (the caller fails them with `.timeout`).
    mutating func removeExpired(now: ContinuousClock.Instant) -> [PendingRequest] {
        let expired = queue.removeExpired(now: now)
        counters.requestsInFlight -= expired.count
        return expired
    }

    /// The earliest instant a queued request may expire.
    var earliestQueuedDeadline: ContinuousClock.Instant? { queue.earliestDeadline }

    /// Stops accepting requests; returns the queued ones (the caller fails them with `.shutdown`).
    mutating func shutDown() -> [PendingRequest] {
        isShutDown = true
        let queued = queue.removeAll()
        counters.requestsInFlight -= queued.count
        return queued
    }

    /// Removes a connection whose thread ended at shutdown; `completed` requests were failed by it.
    mutating func remove(connection id: Int, completed: Int) {
        counters.requestsInFlight -= completed
        if let i = index(of: id) { slots.remove(at: i) }
    }
}
