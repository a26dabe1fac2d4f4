/// The life of one HTTP/2 connection as a pure state machine: no sockets, no threads, no clock
/// of its own. ``HTTP2ClientConnection`` (the I/O layer) feeds it what happened (connected, a stream's end,
/// GOAWAY, PING answered, time passing) and does what it answers.
///
/// It decides the two things that must never be wrong (DESIGN.md, "Lifecycle"):
/// - whether a request that got no answer may have been processed: only a request whose
///   HEADERS reached the socket may have been; a refused stream (RST_STREAM REFUSED_STREAM) or one
///   above a GOAWAY's last stream id certainly was not (RFC 9113 8.7);
/// - when the connection stops taking streams: after GOAWAY, a refused stream, a stream that
///   passed its deadline, an unanswered PING, or a broken socket.
struct ConnectionStateMachine: Sendable {
    typealias Instant = ContinuousClock.Instant

    /// Timing rules, from the client's configuration.
    struct Timing: Sendable, Equatable {
        /// Idle this long (nothing received, no stream open): send PING.
        var pingInterval: Duration = .seconds(60)
        /// A PING unanswered this long retires the connection.
        var pingTimeout: Duration = .seconds(10)
    }

    /// What a GOAWAY said.
    struct Goaway: Sendable, Equatable {
        var lastStreamID: Int32
        var errorCode: UInt32
        /// The `reason` of its debug data (APNs sends `{"reason":"…"}`), if readable.
        var reason: String?
        /// How many streams were open when it arrived: 1 means the request on it was alone.
        var streamsOpen: Int
    }

    /// Why the connection takes no new streams.
    enum RetireCause: Sendable, Equatable {
        case goaway(Goaway)
        case refusedStream
        /// A request passed its deadline on it: the connection is presumed silent.
        case deadline
        case pingUnanswered
        case lost(String)
    }

    /// One stream the machine knows of.
    struct Stream: Sendable, Equatable {
        var deadline: Instant
        /// Its HEADERS frame was handed to the socket: from now on the server may process it.
        var written = false
    }

    struct Connecting: Sendable, Equatable {
        var deadline: Instant
    }

    struct Open: Sendable, Equatable {
        var streams: [Int32: Stream] = [:]
        /// When something last arrived or a stream last ended.
        var lastActivity: Instant
        /// A PING is out since then, unanswered.
        var pingSentAt: Instant?
    }

    /// Retired: takes no new streams; the open ones may still be answered.
    struct Draining: Sendable, Equatable {
        var streams: [Int32: Stream]
        var cause: RetireCause
        var goaway: Goaway?
    }

    struct Closed: Sendable, Equatable {
        /// Why requests not yet sent fail.
        var unsent: HTTP2ClientError
        /// The connection had been up: requests not yet sent go elsewhere as never sent, not as
        /// victims of a connection that could not be made.
        var wasOpen = false
    }

    enum State: Sendable, Equatable {
        case connecting(Connecting)
        case open(Open)
        case draining(Draining)
        case closed(Closed)
    }

    /// What the I/O layer must do.
    enum Action: Sendable, Equatable {
        case sendPing
        /// Cancel the stream (RST_STREAM CANCEL) and fail its request with this outcome.
        case cancel(stream: Int32, StreamOutcome)
        /// The connection no longer takes streams (tell the pool).
        case retire(RetireCause)
        /// Close the socket.
        case close
    }

    private(set) var state: State
    let timing: Timing
    /// No open stream's deadline is before this (it may be stale, never late): rounds that come
    /// before it skip the scan of every stream.
    private var deadlineBound: Instant?

    init(connectDeadline: Instant, timing: Timing = Timing()) {
        state = .connecting(Connecting(deadline: connectDeadline))
        self.timing = timing
    }

    /// New streams may be submitted.
    var takesStreams: Bool {
        if case .open = state { return true }
        return false
    }

    var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    var isConnecting: Bool {
        if case .connecting = state { return true }
        return false
    }

    /// The GOAWAY received, if any.
    var goaway: Goaway? {
        if case .draining(let draining) = state { return draining.goaway }
        return nil
    }

    // MARK: Inputs

    /// TLS and ALPN succeeded; the HTTP/2 session runs.
    mutating func connected(now: Instant) {
        guard case .connecting = state else { return }
        state = .open(Open(lastActivity: now))
    }

    /// The connection could not be made; every request given to it fails unsent.
    mutating func connectFailed(_ error: HTTP2ClientError) {
        state = .closed(Closed(unsent: error))
    }

    /// A request was handed to nghttp2 as stream `id`.
    mutating func streamSubmitted(_ id: Int32, deadline: Instant) {
        modifyStreams { $0[id] = Stream(deadline: deadline) }
        deadlineBound = min(deadlineBound ?? deadline, deadline)
    }

    /// The stream's HEADERS reached the socket.
    mutating func headersWritten(_ id: Int32) {
        modifyStreams { $0[id]?.written = true }
    }

    /// A frame arrived: the connection is alive.
    mutating func received(now: Instant) {
        if case .open(var open) = state {
            open.lastActivity = now
            state = .open(open)
        }
    }

    mutating func pingAnswered(now: Instant) {
        if case .open(var open) = state {
            open.pingSentAt = nil
            open.lastActivity = now
            state = .open(open)
        }
    }

    /// GOAWAY arrived: no new streams; streams above `lastStreamID` will be closed refused.
    mutating func goawayReceived(lastStreamID: Int32, errorCode: UInt32, reason: String?) -> [Action] {
        switch state {
        case .open(let open):
            let goaway = Goaway(
                lastStreamID: lastStreamID, errorCode: errorCode, reason: reason, streamsOpen: open.streams.count)
            state = .draining(Draining(streams: open.streams, cause: .goaway(goaway), goaway: goaway))
            return [.retire(.goaway(goaway))]
        case .draining(var draining):
            // A second GOAWAY may only lower the last stream id (RFC 9113 6.8).
            let lowest = min(draining.goaway?.lastStreamID ?? lastStreamID, lastStreamID)
            let goaway = Goaway(
                lastStreamID: lowest, errorCode: errorCode, reason: reason ?? draining.goaway?.reason,
                streamsOpen: draining.goaway?.streamsOpen ?? draining.streams.count)
            draining.goaway = goaway
            state = .draining(draining)
            return []
        case .connecting, .closed:
            return []
        }
    }

    /// A stream ended. `status` is the final status if the whole answer arrived; `resetCode` is
    /// the RST_STREAM (or close) code. Returns how its request ends, and actions.
    mutating func streamClosed(_ id: Int32, status: Int?, resetCode: UInt32, now: Instant) -> (
        StreamOutcome, [Action]
    ) {
        var stream: Stream?
        modifyStreams { stream = $0.removeValue(forKey: id) }
        let written = stream?.written ?? false
        if case .open(var open) = state {
            open.lastActivity = now
            state = .open(open)
        }
        if let status { return (.answered(status: status), []) }
        let goaway = self.goaway
        if resetCode == Self.refusedStream || (goaway.map { id > $0.lastStreamID } ?? false) {
            if let goaway, id > goaway.lastStreamID {
                return (.refusedByGoaway(alone: goaway.streamsOpen <= 1, stream: id), [])
            }
            return (.refusedStream, retire(.refusedStream))
        }
        if !written { return (.notSent, []) }
        return (.reset(code: resetCode), [])
    }

    /// A submitted stream was never sent (nghttp2 dropped it, for example after GOAWAY).
    mutating func streamNotSent(_ id: Int32) -> StreamOutcome {
        modifyStreams { $0[id] = nil }
        if let goaway, id > goaway.lastStreamID { return .refusedByGoaway(alone: goaway.streamsOpen <= 1, stream: id) }
        return .notSent
    }

    /// A stream that ended with its connection, and how its request ends.
    struct LostStream: Sendable, Equatable {
        var stream: Int32
        var outcome: StreamOutcome
    }

    /// The socket broke: every open stream ends (processed if written, unless GOAWAY said not),
    /// in stream order.
    mutating func connectionLost(_ reason: String) -> [LostStream] {
        let streams = currentStreams
        let goaway = self.goaway
        let wasOpen = !isConnecting
        state = .closed(
            Closed(unsent: HTTP2ClientError(.connectionLost, reason, mayHaveBeenProcessed: false), wasOpen: wasOpen))
        return streams.keys.sorted().map { id in
            let stream = streams[id]!
            if let goaway, id > goaway.lastStreamID {
                return LostStream(stream: id, outcome: .refusedByGoaway(alone: goaway.streamsOpen <= 1, stream: id))
            }
            return LostStream(stream: id, outcome: stream.written ? .lost(reason) : .notSent)
        }
    }

    /// Time passed: deadlines, PING, the connect timeout. Call on every round.
    mutating func tick(now: Instant) -> [Action] {
        var actions: [Action] = []
        switch state {
        case .connecting(let connecting):
            if connecting.deadline <= now {
                state = .closed(
                    Closed(unsent: HTTP2ClientError(.connectFailed, "connect timed out", mayHaveBeenProcessed: false)))
                actions.append(.close)
            }
        case .open(var open):
            if deadlineBound.map({ $0 <= now }) ?? false {
                for (id, stream) in open.streams where stream.deadline <= now {
                    open.streams[id] = nil
                    actions.append(.cancel(stream: id, .timedOut(written: stream.written)))
                }
                deadlineBound = open.streams.values.map(\.deadline).min()
            }
            if let sent = open.pingSentAt {
                if sent + timing.pingTimeout <= now {
                    state = .open(open)
                    actions += retire(.pingUnanswered)
                    let lost = connectionLost("the connection did not answer PING")
                    for ended in lost { actions.append(.cancel(stream: ended.stream, ended.outcome)) }
                    actions.append(.close)
                    return actions
                }
            } else if open.streams.isEmpty && open.lastActivity + timing.pingInterval <= now {
                open.pingSentAt = now
                actions.append(.sendPing)
            }
            state = .open(open)
            if actions.contains(where: { if case .cancel = $0 { true } else { false } }) {
                actions += retire(.deadline)
            }
        case .draining(var draining):
            var expired = false
            if deadlineBound.map({ $0 <= now }) ?? false {
                for (id, stream) in draining.streams where stream.deadline <= now {
                    draining.streams[id] = nil
                    expired = true
                    actions.append(.cancel(stream: id, .timedOut(written: stream.written)))
                }
                deadlineBound = draining.streams.values.map(\.deadline).min()
            }
            state = .draining(draining)
            if expired && draining.streams.isEmpty { actions.append(.close) }
        case .closed:
            break
        }
        return actions
    }

    /// The latest instant by which `tick` must run again (a deadline, PING due or unanswered).
    func nextWakeUp() -> Instant? {
        switch state {
        case .connecting(let connecting):
            return connecting.deadline
        case .open(let open):
            var next = open.streams.isEmpty ? nil : deadlineBound
            if let sent = open.pingSentAt {
                next = min(next ?? sent + timing.pingTimeout, sent + timing.pingTimeout)
            } else if open.streams.isEmpty {
                next = min(next ?? open.lastActivity + timing.pingInterval, open.lastActivity + timing.pingInterval)
            }
            return next
        case .draining(let draining):
            return draining.streams.isEmpty ? nil : deadlineBound
        case .closed:
            return nil
        }
    }

    /// The connection takes no new streams from now on (already-open ones may finish).
    mutating func retire(_ cause: RetireCause) -> [Action] {
        switch state {
        case .open(let open):
            state = .draining(Draining(streams: open.streams, cause: cause, goaway: nil))
            return [.retire(cause)]
        case .connecting:
            state = .closed(
                Closed(
                    unsent: HTTP2ClientError(.connectionLost, "the connection was retired", mayHaveBeenProcessed: false)
                ))
            return [.retire(cause), .close]
        case .draining, .closed:
            return []
        }
    }

    /// Why a request that was never submitted fails here.
    var unsentOutcome: StreamOutcome {
        switch state {
        case .closed(let closed): return closed.wasOpen ? .notSent : .connectFailed(closed.unsent)
        default: return .notSent
        }
    }

    /// Streams still open (submitted, not closed).
    var openStreamCount: Int { currentStreams.count }

    /// Open streams whose HEADERS reached the socket.
    var writtenStreams: [Int32] { currentStreams.filter { $0.value.written }.map(\.key) }

    private var currentStreams: [Int32: Stream] {
        switch state {
        case .open(let open): open.streams
        case .draining(let draining): draining.streams
        case .connecting, .closed: [:]
        }
    }

    private mutating func modifyStreams(_ body: (inout [Int32: Stream]) -> Void) {
        // A payload bound with `var` is a second reference to its dictionary while `state` still holds the first:
        // `state` holds a stand-in meanwhile, so the dictionary is changed in place, not copied at every change.
        switch state {
        case .open(var open):
            state = .connecting(Connecting(deadline: open.lastActivity))
            body(&open.streams)
            state = .open(open)
        case .draining(var draining):
            state = .closed(Closed(unsent: Self.standIn))
            body(&draining.streams)
            state = .draining(draining)
        case .connecting, .closed:
            break
        }
    }

    /// What `state` holds while a draining connection's streams change (never seen outside `modifyStreams`).
    private static let standIn = HTTP2ClientError(.connectFailed, "", mayHaveBeenProcessed: false)

    /// RST_STREAM REFUSED_STREAM (RFC 9113 7).
    static let refusedStream: UInt32 = 0x7
}
