import MonotonicTime

/// The client's connection pool as a pure state machine (no threads, no I/O, time passed in as
/// an `Instant`): which connection takes a request, when a connection opens, is retired or
/// replaced, and which failed request is sent again. ``ClientCore`` owns it on the client's event loop
/// and carries out what it answers.
///
/// Rules (docs/DESIGN.md, "The APNs request" and "Lifecycle"):
/// - A new connection carries one request at a time until an answer proves it (the client's
///   ``HTTP2ClientConfiguration/provesConnection``; for APNs, anything but 403); then up to
///   `maxStreams` at once. That wait is bounded: once the connection is up and its one request has
///   gone ``probeBound`` without an answer, the requests that wait for it are not held for the rest
///   of that request's deadline: the connection's stream limit opens to them (the server's own
///   limit still applies). A connection opened for suspects keeps its first request alone.
/// - A request goes to the least-loaded connection with room; without one, or when even that one
///   carries ``spreadThreshold`` requests, a new connection is started if fewer than
///   `maxConnections` are live; else the request waits in the queue.
/// - A retired connection takes no new requests; it leaves when its last request is done. One
///   that had been up is replaced at once, so a push does not wait for the replacement's handshake.
/// - A request the server certainly did not process is sent again on another connection while its
///   deadline allows, at most ``maxSends`` sends in all; one it may have processed never is.
/// - A request refused by a GOAWAY is a suspect: it may be what makes the server go away. Suspects
///   go only to connections opened for them after the GOAWAY, never to connections carrying other
///   traffic, and the first request of such a connection goes alone (it is probing). A suspect
///   refused by GOAWAY while alone on its connection, for the second time, is the cause: it fails
///   without another send, and the suspects behind it go on unharmed. Suspects are sent in the
///   order of their refused stream ids: the first above the last stream id is the likeliest cause.
/// - Connections started after GOAWAYs in a row are paced (APNs treats rapid reconnects as abuse), and so
///   are those after connections an answer retired (``HTTP2ClientConfiguration/retiresConnection``).
struct PoolStateMachine: Sendable {
    /// The most times one request is sent (HEADERS written) in all.
    static let maxSends = 3
    /// The most connections one request is handed to (bounds requests that are never sent).
    static let maxTries = 6
    /// Requests in flight on the least-loaded connection from which another connection is opened.
    static let spreadThreshold = 32
    /// How long a new connection's one request may go unanswered before the requests waiting behind it are given
    /// to the connection anyway (nanoseconds).
    static let probeBound: UInt64 = 1_000_000_000

    enum Phase: Sendable, Equatable {
        /// New: one request at a time until a proving answer.
        case probing
        /// Up to `maxStreams` requests at once.
        case open
        /// Takes no new requests; leaves once empty.
        case retired
    }

    struct Slot: Sendable {
        let id: Int
        var phase: Phase = .probing
        /// Requests handed to this connection and not finished.
        var assigned = 0
        /// Its TLS connection has been up.
        var established = false
        /// Opened after a GOAWAY to carry suspects.
        var forSuspects = false
        /// Opened after the latest GOAWAY (proving it ends the reconnect pacing).
        var afterGoaway = false
        /// Since when, while probing and up, its request has waited for an answer (nil: none waits).
        var probeSince: Instant?
    }

    /// Where `submit` put a request.
    enum Placement: Sendable, Equatable {
        /// Handed to a running connection: the caller gives it to that connection.
        case connection(id: Int)
        /// Handed to a new connection, which the caller must make (and give the request to).
        case newConnection(id: Int, notBefore: Instant?)
        /// In the queue, until a connection has room.
        case queued
        /// Refused: the client is shut down.
        case rejected
    }

    /// One request that ended on a connection.
    struct Ended: Sendable {
        var request: PendingRequest
        var outcome: StreamOutcome
        var response: HTTP2Response?
    }

    /// What a connection tells the pool (made by its ``ConnectionStateMachine``): the requests that
    /// ended since its last report, and where the connection stands now.
    struct Report: Sendable {
        var results: [Ended] = []
        /// The connection's TLS connection has been up.
        var established = false
        /// An answer that proves the connection arrived.
        var proven = false
        /// The connection is no longer usable; `goaway` when a GOAWAY retired it, `retiredByAnswer` when an answer
        /// the client's `retiresConnection` names did (either way the next connections are paced).
        var retire = false
        var goaway = false
        var retiredByAnswer = false
        /// For the client's `onEvent` (the pool does not read them).
        var events: [HTTP2ClientEvent] = []
    }

    /// A request's final result, for its completion.
    struct Delivery: Sendable {
        var request: PendingRequest
        var result: Result<HTTP2Response, HTTP2ClientError>
    }

    /// A request handed to a running connection.
    struct Assignment: Sendable {
        var request: PendingRequest
        var connection: Int
    }

    /// A connection the pool has made room for: the caller must make it, give it `first` if any, and it
    /// must not connect before `notBefore` (pacing after GOAWAY).
    struct NewConnection: Sendable {
        var id: Int
        var notBefore: Instant?
        var first: PendingRequest?
    }

    /// What the caller must do after `finish`.
    struct Effects: Sendable {
        /// Completions to call.
        var deliveries: [Delivery] = []
        /// Requests to give to running connections.
        var assignments: [Assignment] = []
        /// New connections to make.
        var start: [NewConnection] = []
        /// The reporting connection is retired and empty: it was removed; close it.
        var exit = false
    }

    let maxConnections: Int
    let maxStreams: Int
    private(set) var slots: [Slot] = []
    private(set) var queue = RequestQueue()
    /// Suspects waiting for a connection opened for them.
    private(set) var suspects = RequestQueue()
    private(set) var isShutDown = false
    private var nextID = 0
    private var counters = HTTP2ClientStatistics()
    /// GOAWAYs since a connection opened after one was proven.
    private(set) var goawayStreak = 0
    /// No connection starts before this (pacing after GOAWAY).
    private(set) var pacedUntil: Instant?

    init(maxConnections: Int, maxStreams: Int) {
        self.maxConnections = maxConnections
        self.maxStreams = maxStreams
    }

    /// The counters the pool keeps (`requestsInFlight` is the client's: it counts from `send` on).
    var statistics: HTTP2ClientStatistics {
        var result = counters
        result.connectionsOpen = liveCount
        return result
    }

    private var liveCount: Int { slots.reduce(0) { $0 + ($1.phase == .retired ? 0 : 1) } }

    private func capacity(_ slot: Slot, now: Instant) -> Int {
        switch slot.phase {
        case .probing: Self.probeOutlasted(slot, now: now) ? maxStreams : 1
        case .open: maxStreams
        case .retired: 0
        }
    }

    /// A probing connection's request has gone ``probeBound`` unanswered: the connection takes more (not one opened
    /// for suspects, whose first request must go alone).
    private static func probeOutlasted(_ slot: Slot, now: Instant) -> Bool {
        guard !slot.forSuspects, let since = slot.probeSince else { return false }
        return now - since >= probeBound
    }

    /// Starts or ends the wait of slot `i`'s probe: it waits while the connection is up, probing and carries a
    /// request; `restart` after an answer or failure (a new request is the probe now).
    private mutating func trackProbe(_ i: Int, now: Instant, restart: Bool = false) {
        if slots[i].phase == .probing && slots[i].established && slots[i].assigned > 0 {
            if restart || slots[i].probeSince == nil { slots[i].probeSince = now }
        } else {
            slots[i].probeSince = nil
        }
    }

    /// When the earliest probe outlasts ``probeBound`` while requests wait for room (the caller's timer), or nil.
    var nextProbeBound: Instant? {
        guard !queue.isEmpty else { return nil }
        return slots.lazy.filter { $0.phase == .probing && !$0.forSuspects && $0.assigned < maxStreams }
            .compactMap { $0.probeSince }
            .min().map { $0 + Self.probeBound }
    }

    /// The timer of ``nextProbeBound`` fired: the requests waiting go to connections whose probe outlasted the
    /// bound, while they have room.
    mutating func probesOutlasted(now: Instant) -> [Assignment] {
        var assignments: [Assignment] = []
        for i in slots.indices where slots[i].phase == .probing && Self.probeOutlasted(slots[i], now: now) {
            while slots[i].assigned < capacity(slots[i], now: now), let next = queue.popFirst() {
                slots[i].assigned += 1
                assignments.append(Assignment(request: next, connection: slots[i].id))
            }
        }
        return assignments
    }

    private func index(of id: Int) -> Int? { slots.firstIndex { $0.id == id } }

    /// The pause before the next connection after `streak` GOAWAYs in a row: none after one
    /// (APNs sends GOAWAY when it restarts), then 250 ms, doubling, at most 4 s (nanoseconds).
    static func reconnectDelay(afterGoaways streak: Int) -> UInt64 {
        guard streak >= 2 else { return 0 }
        return 250_000_000 << UInt64(min(streak - 2, 4))
    }

    /// Accepts a new request from `send`.
    mutating func submit(_ request: PendingRequest, now: Instant) -> Placement {
        guard !isShutDown else { return .rejected }
        if let placement = placeOnConnection(request, excluding: nil, now: now) { return placement }
        enqueue(request, front: false)
        return .queued
    }

    /// Puts a request on a connection with room, or a new one; nil when every connection is full.
    private mutating func placeOnConnection(_ request: PendingRequest, excluding: Int?, now: Instant) -> Placement? {
        var best: Int?
        for i in slots.indices where slots[i].id != excluding && slots[i].assigned < capacity(slots[i], now: now) {
            // A suspect never shares a connection with traffic that was not refused beside it.
            if request.suspect && !slots[i].forSuspects { continue }
            if best == nil || slots[i].assigned < slots[best!].assigned { best = i }
        }
        // A busy connection gets company while the limit allows: the configured connections
        // share the load (one connection's round trips would bound it otherwise).
        if let i = best, slots[i].assigned >= Self.spreadThreshold, liveCount < maxConnections, !request.suspect {
            best = nil
        }
        if let i = best {
            slots[i].assigned += 1
            trackProbe(i, now: now)
            return .connection(id: slots[i].id)
        }
        if liveCount < maxConnections {
            let started = startConnection(with: request, now: now)
            return .newConnection(id: started.id, notBefore: started.notBefore)
        }
        return nil
    }

    private mutating func enqueue(_ request: PendingRequest, front: Bool) {
        if request.suspect {
            if front { suspects.prepend(request) } else { suspects.append(request) }
        } else {
            if front { queue.prepend(request) } else { queue.append(request) }
        }
    }

    private mutating func startConnection(with request: PendingRequest?, now: Instant) -> NewConnection {
        nextID += 1
        counters.connectionsOpened += 1
        var slot = Slot(id: nextID)
        if let request {
            slot.assigned = 1
            slot.forSuspects = request.suspect
        }
        slot.afterGoaway = goawayStreak > 0
        slots.append(slot)
        return NewConnection(id: nextID, notBefore: pacedUntil.flatMap { $0 > now ? $0 : nil }, first: request)
    }

    /// Records a connection's report; returns what the caller must do.
    mutating func finish(connection id: Int, report: Report, now: Instant) -> Effects {
        var effects = Effects()
        guard let i = index(of: id) else { return effects }
        slots[i].assigned -= report.results.count
        if report.established { slots[i].established = true }
        // Up, or a request ended: the probe's wait starts now (or ends).
        trackProbe(i, now: now, restart: !report.results.isEmpty)
        if report.proven && slots[i].phase == .probing {
            slots[i].phase = .open
            slots[i].probeSince = nil
            if slots[i].afterGoaway {
                goawayStreak = 0
                pacedUntil = nil
            }
        }
        var replace = false
        if report.retire && slots[i].phase != .retired {
            slots[i].phase = .retired
            counters.connectionsReplaced += 1
            replace = slots[i].established
            if report.goaway || report.retiredByAnswer {
                goawayStreak += 1
                let delay = Self.reconnectDelay(afterGoaways: goawayStreak)
                pacedUntil = delay > 0 ? now + delay : nil
            }
        }

        var retries: [(PendingRequest, Int32)] = []
        var connectFailure: HTTP2ClientError?
        for ended in report.results {
            if let response = ended.response, case .answered = ended.outcome {
                effects.deliveries.append(Delivery(request: ended.request, result: .success(response)))
                continue
            }
            if case .connectFailed(let error) = ended.outcome, !slots[i].established { connectFailure = error }
            if let retry = retry(of: ended.request, after: ended.outcome, now: now) {
                var order: Int32 = .max
                if case .refusedByGoaway(_, let stream) = ended.outcome { order = stream }
                retries.append((retry, order))
                counters.retries += 1
            } else {
                effects.deliveries.append(
                    Delivery(request: ended.request, result: .failure(finalError(ended.request, ended.outcome))))
            }
        }

        // The origin is unreachable and no connection works: fail the waiting requests now
        // rather than letting each of them try a connection of its own.
        if let failure = connectFailure, !slots.contains(where: { $0.phase != .retired && $0.established }) {
            for request in queue.removeAll() + suspects.removeAll() {
                let error = HTTP2ClientError(
                    failure.code, "no connection to the origin: \(failure.reason)", mayHaveBeenProcessed: false)
                effects.deliveries.append(Delivery(request: request, result: .failure(error)))
            }
        }

        // Suspects in stream order (see the type's rules), in front of what waits.
        var waiting: [PendingRequest] = []
        for (request, _) in retries.sorted(by: { $0.1 < $1.1 }) {
            switch placeOnConnection(request, excluding: id, now: now) {
            case .connection(let target)?: effects.assignments.append(Assignment(request: request, connection: target))
            case .newConnection(let target, let notBefore)?:
                effects.start.append(NewConnection(id: target, notBefore: notBefore, first: request))
            case .queued?, .rejected?, nil: waiting.append(request)
            }
        }
        for request in waiting.reversed() { enqueue(request, front: true) }

        if let i = index(of: id) {
            // Take waiting requests while this connection has room.
            while slots[i].assigned < capacity(slots[i], now: now) {
                let next = slots[i].forSuspects ? (suspects.popFirst() ?? queue.popFirst()) : queue.popFirst()
                guard let next else { break }
                slots[i].assigned += 1
                effects.assignments.append(Assignment(request: next, connection: id))
            }
            trackProbe(i, now: now)
        }
        // Replace retired connections while requests wait, suspects first.
        while liveCount < maxConnections, let next = suspects.popFirst() ?? queue.popFirst() {
            effects.start.append(startConnection(with: next, now: now))
            replace = false
        }
        // A connection that was up and is gone is replaced before a push needs it.
        if replace && effects.start.isEmpty && !isShutDown && liveCount < maxConnections {
            effects.start.append(startConnection(with: nil, now: now))
        }

        if let i = index(of: id), slots[i].phase == .retired && slots[i].assigned == 0 {
            slots.remove(at: i)
            effects.exit = true
        }
        return effects
    }

    /// The request to send again after `outcome`, or nil when it ends here.
    func retry(of request: PendingRequest, after outcome: StreamOutcome, now: Instant) -> PendingRequest? {
        guard !isShutDown, outcome.certainlyNotProcessed, now < request.deadline else { return nil }
        let sends = request.sends + (outcome.wasSent ? 1 : 0)
        let tries = request.tries + 1
        guard sends < Self.maxSends, tries < Self.maxTries else { return nil }
        switch outcome {
        case .refusedByGoaway(let alone, _):
            // Alone on its connection twice, and twice the server went away: it is the cause.
            if alone && request.drewGoawayAlone { return nil }
            return request.retried(sends: sends, tries: tries, suspect: true, drewGoawayAlone: alone)
        case .connectFailed:
            // Another connection may work (another address, a passing fault), once.
            guard request.connectFailures == 0 else { return nil }
            return request.retried(sends: sends, tries: tries, connectFailed: true)
        case .notSent, .refusedStream:
            return request.retried(sends: sends, tries: tries)
        case .timedOut, .shutdown, .answered, .reset, .lost, .tooLarge:
            return nil
        }
    }

    private func finalError(_ request: PendingRequest, _ outcome: StreamOutcome) -> HTTP2ClientError {
        let error = outcome.error ?? HTTP2ClientError(.protocolError, "no answer", mayHaveBeenProcessed: true)
        if case .refusedByGoaway(true, _) = outcome, request.drewGoawayAlone {
            return HTTP2ClientError(
                .refused, "the server went away each time this request was sent alone", mayHaveBeenProcessed: false)
        }
        return error
    }

    /// Removes the queued requests whose deadline has passed (``timerFired(now:)`` fails them with `.timeout`).
    mutating func removeExpired(now: Instant) -> [PendingRequest] {
        queue.removeExpired(now: now) + suspects.removeExpired(now: now)
    }

    /// When the caller's queue timer is due: a queued request's deadline or a probe's bound, whichever comes
    /// first; nil when neither waits or the pool is shut down.
    var nextWakeUp: Instant? {
        guard !isShutDown else { return nil }
        switch (earliestQueuedDeadline, nextProbeBound) {
        case (let a?, let b?): return min(a, b)
        case (let a, let b): return a ?? b
        }
    }

    /// The queue timer fired: queued requests past their deadline fail with `.timeout` (no connection took them),
    /// and waiting requests go to connections whose probe outlasted its bound.
    mutating func timerFired(now: Instant) -> Effects {
        var effects = Effects()
        for request in removeExpired(now: now) {
            let error = HTTP2ClientError(.timeout, "no connection in time", mayHaveBeenProcessed: false)
            effects.deliveries.append(Delivery(request: request, result: .failure(error)))
        }
        effects.assignments = probesOutlasted(now: now)
        return effects
    }

    /// What a request gets that ended on a connection the pool no longer counts (the client shut down): its
    /// answer, or its outcome's error, for good.
    static func delivery(of ended: Ended) -> Delivery {
        if let response = ended.response, case .answered = ended.outcome {
            return Delivery(request: ended.request, result: .success(response))
        }
        let error = ended.outcome.error ?? HTTP2ClientError(.protocolError, "no answer", mayHaveBeenProcessed: true)
        return Delivery(request: ended.request, result: .failure(error))
    }

    /// A request the pool refused or dropped because the client shuts down: never sent.
    static func shutDownDelivery(of request: PendingRequest) -> Delivery {
        Delivery(request: request, result: .failure(StreamOutcome.shutdown(written: false).error!))
    }

    /// The earliest instant a queued request may expire.
    var earliestQueuedDeadline: Instant? {
        switch (queue.earliestDeadline, suspects.earliestDeadline) {
        case (let a?, let b?): min(a, b)
        case (let a, let b): a ?? b
        }
    }

    /// Stops accepting requests and forgets every connection (the caller fails what they carry and
    /// closes them); returns the queued requests (the caller fails them with `.shutdown`).
    mutating func shutDown() -> [PendingRequest] {
        isShutDown = true
        slots = []
        return queue.removeAll() + suspects.removeAll()
    }
}
