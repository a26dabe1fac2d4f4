import MonotonicTime
import OutboundConnections

/// The life of one HTTP/2 connection as a pure state machine: no sockets, no loop, no clock of its
/// own (time comes in as an `Instant` with each input). ``HTTP2ClientConnection`` (the I/O shell) feeds it
/// what happened (connected, a header or data received, a stream's end, GOAWAY, a PING answer, a
/// timer) and does what each input's result says; the machine keeps the requests given to the
/// connection, its streams and their answers, and the report the pool reads (``takeReport()``).
///
/// It decides the things that must never be wrong (docs/DESIGN.md, "Lifecycle"):
/// - whether a request that got no answer may have been processed: only a request whose HEADERS
///   were handed to the socket may have been; a refused stream (RST_STREAM REFUSED_STREAM) or one
///   above a GOAWAY's last stream id certainly was not (RFC 9113 8.7);
/// - when the connection stops taking streams: after GOAWAY, a refused stream, a stream that passed
///   its deadline, an unanswered PING, an answer the client's `retiresConnection` names, a broken
///   connection, or a connect that failed or took too long;
/// - when it is proven: an answer the client's `provesConnection` accepts (APNs: anything but 403).
struct ConnectionStateMachine {
    /// Timing rules, from the client's configuration (nanoseconds).
    struct Timing: Sendable, Equatable {
        /// Resolving, connecting and the TLS handshake together.
        var connectTimeout: UInt64 = 5_000_000_000
        /// Idle this long (nothing received, no stream open): send PING.
        var pingInterval: UInt64 = 60_000_000_000
        /// A PING unanswered this long retires the connection.
        var pingTimeout: UInt64 = 10_000_000_000
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
        case goaway
        case refusedStream
        /// A request passed its deadline on it: the connection is presumed silent (or, while
        /// connecting, unreachable).
        case deadline
        case pingUnanswered
        /// An answer said the connection must take no more requests (the client's `retiresConnection`).
        case answer
        case lost
    }

    /// Why the connection could not be made or broke, as the I/O shell saw it.
    enum Failure: Sendable, Equatable {
        /// The host name did not resolve (the resolver's words).
        case resolve(String)
        /// No TCP connection (the loop's words, such as "connect failed: connection refused"; said in the system's).
        case connect(String)
        /// The server's certificate was not accepted (OpenSSL's words).
        case certificate(String)
        /// The TLS handshake failed otherwise, or the connection closed during it.
        case handshake(String)
        /// The connection closed or broke once up (`closedByPeer`: the server closed it).
        case broken(String, closedByPeer: Bool)
        /// The proxy gave no tunnel: the event's kind (one of the `proxy...` kinds) and its words, naming it.
        case proxy(HTTP2ClientEvent.Kind, String)
    }

    /// One submitted stream: its request and what has arrived of the answer.
    struct Stream {
        let request: PendingRequest
        /// Its HEADERS frame was handed to the socket: from now on the server may process it.
        var written = false
        /// Bytes of the request's body handed to the session so far.
        var bodySent = 0
        /// The final `:status` (informational 1xx answers are skipped).
        var status: Int?
        var headers: [(name: String, value: String)] = []
        var body: [UInt8] = []
        /// The answer ended (END_STREAM received).
        var ended = false
        /// The body passed `maxResponseBodyBytes`: the stream was cancelled.
        var tooLarge = false
    }

    struct Open: Sendable, Equatable {
        /// When something last arrived or a stream last ended.
        var lastActivity: Instant
        /// A PING is out since then, unanswered.
        var pingSentAt: Instant?
    }

    enum State: Sendable, Equatable {
        /// Waiting to connect (reconnects after GOAWAYs in a row are paced).
        case paced(until: Instant)
        /// Resolving, connecting, handshaking.
        case connecting(deadline: Instant)
        case open(Open)
        /// Retired: takes no new streams; the open ones may still be answered.
        case draining(goaway: Goaway?)
        /// Why requests given to it now fail (not sent).
        case closed(unsent: StreamOutcome)
    }

    /// What the shell does once `start` has run.
    enum StartResult: Sendable, Equatable {
        case connect
        /// Wait for the timer (pacing).
        case wait
    }

    /// What the shell does once the TLS connection is up.
    enum ConnectedResult: Sendable, Equatable {
        /// Make the nghttp2 session and send the connection preface.
        case openSession
        /// Close the connection (HTTP/2 not agreed, or the connection was given up meanwhile).
        case close
    }

    /// What the shell does after `accept`.
    enum AcceptResult: Sendable, Equatable {
        /// Submit what waits (the session is open).
        case submit
        /// Nothing yet: it goes out once the connection is up.
        case wait
        /// It ended at once (the connection takes no streams): the report carries it.
        case ended
    }

    /// What the shell does after data arrived on a stream.
    enum DataResult: Sendable, Equatable {
        case kept
        /// The answer is too large: cancel the stream (RST_STREAM CANCEL).
        case cancel
    }

    /// What the shell does with the session after nghttp2 read what arrived.
    enum ReadResult: Sendable, Equatable {
        case carryOn
        /// The session is broken: write what nghttp2 queued (a GOAWAY telling the server why), end the session and
        /// reset the stream.
        case breakOff
    }

    /// What the shell does in a round of writing, after each call of `nghttp2_session_mem_send`.
    enum WriteStep: Sendable, Equatable {
        /// Gather more from nghttp2.
        case gather
        /// Write what is gathered; with `last`, the round is over, else gather more (unless the write broke the
        /// connection).
        case write(last: Bool)
        /// Nothing more to write: the round is over.
        case done
        /// nghttp2 failed: the connection is broken; end the session and reset the stream, writing nothing more.
        case breakOff
    }

    /// What the shell does after the timer fired.
    struct TimerResult: Sendable, Equatable {
        /// Start connecting (pacing is over).
        var connect = false
        var sendPing = false
        /// Streams that passed their deadline: cancel them (RST_STREAM CANCEL).
        var cancel: [Int32] = []
        /// Close the connection at once (connect timed out, PING unanswered, given up).
        var close = false
    }

    /// The largest response body kept; a larger one fails its request.
    static let maxResponseBodyBytes = 1 << 20
    /// The most response header fields kept (APNs sends two or three); further ones are dropped.
    static let maxResponseHeaderFields = 64
    /// RST_STREAM REFUSED_STREAM (RFC 9113 7).
    static let refusedStreamCode: UInt32 = 0x7

    private(set) var state: State
    let timing: Timing
    private let provesConnection: @Sendable (Int) -> Bool
    private let retiresConnection: @Sendable (HTTP2Response) -> Bool
    /// Requests given to the connection and not yet submitted (it is connecting, or the server's
    /// stream limit is reached), oldest first.
    private(set) var waiting = RequestQueue()
    /// Submitted streams by id, until they close. Kept beside `state` rather than in its payloads, so
    /// that an answer's bytes are appended in place (open and draining connections have streams; the
    /// others have none).
    private(set) var streams: [Int32: Stream] = [:]
    /// No open stream's deadline is before this (it may be stale, never late).
    private var deadlineBound: Instant?
    private(set) var proven = false
    private var established = false
    private var sawGoaway = false
    private var retiredByAnswer = false
    /// What the pool has not been told yet.
    private var results: [PoolStateMachine.Ended] = []
    private var events: [HTTP2ClientEvent] = []
    /// The flags last reported (a change is news for the pool).
    private var reportedFlags: (established: Bool, proven: Bool, retired: Bool) = (false, false, false)

    init(
        timing: Timing = Timing(), notBefore: Instant? = nil,
        provesConnection: @escaping @Sendable (Int) -> Bool = { _ in true },
        retiresConnection: @escaping @Sendable (HTTP2Response) -> Bool = { _ in false }
    ) {
        self.timing = timing
        self.provesConnection = provesConnection
        self.retiresConnection = retiresConnection
        state = .paced(until: notBefore ?? 0)
    }

    // MARK: Questions

    /// New streams may be submitted.
    var takesStreams: Bool {
        if case .open = state { return true }
        return false
    }

    var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    /// The connection takes no new requests (retired or closed).
    var isRetired: Bool {
        switch state {
        case .draining, .closed: true
        case .paced, .connecting, .open: false
        }
    }

    /// The GOAWAY received, if any.
    var goaway: Goaway? {
        if case .draining(let goaway) = state { return goaway }
        return nil
    }

    /// Open streams whose HEADERS were handed to the socket.
    var writtenStreams: [Int32] { streams.filter { $0.value.written }.map(\.key).sorted() }

    // MARK: Connecting

    /// Begins: connect now, or wait for the timer when reconnects are paced.
    mutating func start(now: Instant) -> StartResult {
        guard case .paced(let until) = state else { return .wait }
        if until > now { return .wait }
        state = .connecting(deadline: now + timing.connectTimeout)
        return .connect
    }

    /// While connecting, the bound of the connection's own set-up through a proxy (the tunnel and TLS inside it):
    /// a few milliseconds before the connect deadline, so that a proxy that never answers is reported as the
    /// proxy's failure, in words naming it, rather than as the connection's deadline.
    var tunnelDeadline: Instant? {
        guard case .connecting(let deadline) = state else { return nil }
        return deadline - min(timing.connectTimeout / 2, 5_000_000)
    }

    /// TLS succeeded; `http2Agreed` tells whether ALPN chose h2.
    mutating func connected(http2Agreed: Bool, now: Instant) -> ConnectedResult {
        guard case .connecting = state else { return .close }
        guard http2Agreed else {
            fail(.tls, .alpnRefused, "the server did not agree to HTTP/2 (ALPN h2)", detail: "")
            return .close
        }
        state = .open(Open(lastActivity: now))
        established = true
        events.append(HTTP2ClientEvent(.connected))
        return .openSession
    }

    /// The connection could not be made, or broke.
    mutating func failed(_ failure: Failure) {
        if case .proxy(let kind, let text) = failure {
            switch state {
            case .paced, .connecting: break  // said below, with the requests' outcome
            default:
                // The connection was given up first (a push's deadline passed while the proxy said nothing): the
                // operator still learns which proxy failed, and how.
                events.append(HTTP2ClientEvent(kind, text))
            }
        }
        switch state {
        case .paced, .connecting:
            switch failure {
            case .resolve(let text):
                fail(.connectFailed, .cannotResolve, "cannot resolve the host: \(text)", detail: text)
            case .connect(let text):
                let words = Self.systemWords(text)
                fail(.connectFailed, .cannotConnect, "cannot connect: \(words)", detail: words)
            case .certificate(let text):
                fail(.tls, .tlsVerificationFailed, "the server's certificate was not accepted: \(text)", detail: text)
            case .handshake(let text), .broken(let text, _):
                fail(.tls, .tlsFailed, "the TLS handshake failed: \(text)", detail: text)
            case .proxy(let kind, let text):
                fail(.connectFailed, kind, text, detail: text)
            }
        case .open, .draining:
            let reason: String
            switch failure {
            case .broken(_, closedByPeer: true): reason = "the connection closed before the answer"
            case .resolve(let text), .connect(let text), .certificate(let text), .handshake(let text),
                .broken(let text, _), .proxy(_, let text):
                reason = "the connection broke: \(text)"
            }
            lose(reason)
        case .closed:
            break
        }
    }

    /// The stream under the session (TCP, TLS, a proxy's tunnel) failed: what that means for the connection.
    mutating func streamFailed(_ failure: ClientStreamFailure) {
        failed(Failure(failure))
    }

    /// The stream closed without a failure while the pool still counts the connection (the loop is stopping): the
    /// same as broken.
    mutating func streamClosedQuietly() {
        failed(.broken("the connection closed", closedByPeer: false))
    }

    /// `nghttp2_session_mem_recv` took `consumed` of the `count` bytes that arrived (negative: nghttp2's error, which
    /// the shell gives in nghttp2's words as `error`). Bytes it did not take cannot be given again: the connection is
    /// broken either way.
    mutating func read(consumed: Int, of count: Int, error: String? = nil) -> ReadResult {
        if consumed < 0 {
            let words = error ?? "error \(consumed)"
            failed(.broken("the server broke the HTTP/2 protocol (\(words))", closedByPeer: false))
            return .breakOff
        }
        guard consumed == count else {
            failed(.broken("the HTTP/2 session took \(consumed) of \(count) bytes read", closedByPeer: false))
            return .breakOff
        }
        return .carryOn
    }

    /// `nghttp2_session_mem_send` gave `length` bytes (0: nothing more; negative: nghttp2's error, which the shell
    /// gives in nghttp2's words as `error`), and `gathered` bytes wait to be written: whether to gather on or write
    /// them, one write per `batch` bytes.
    mutating func serialized(_ length: Int, gathered: Int, batch: Int, error: String? = nil) -> WriteStep {
        if length < 0 {
            failed(.broken("nghttp2: \(error ?? "error \(length)")", closedByPeer: false))
            return .breakOff
        }
        if length > 0 && gathered < batch { return .gather }
        return gathered == 0 ? .done : .write(last: length == 0)
    }

    /// The system's words for a failed connect, as `strerror` says them ("Connection refused"): the loop gives
    /// libuv's (`uv_strerror`: "connect failed: connection refused"), which only differ in case.
    static func systemWords(_ text: String) -> String {
        var words = Substring(text)
        if let colon = words.firstRange(of: ": ") { words = words[colon.upperBound...] }
        guard let first = words.first else { return text }
        return first.uppercased() + words.dropFirst()
    }

    /// Fails the connect: every request given to it ends unsent, and the event says why.
    private mutating func fail(
        _ code: HTTP2ClientError.Code, _ kind: HTTP2ClientEvent.Kind, _ reason: String, detail: String
    ) {
        state = .closed(unsent: .connectFailed(HTTP2ClientError(code, reason, mayHaveBeenProcessed: false)))
        events.append(HTTP2ClientEvent(kind, detail))
        endWaiting()
    }

    // MARK: Requests

    /// The pool gave the connection a request.
    mutating func accept(_ request: PendingRequest) -> AcceptResult {
        switch state {
        case .paced, .connecting:
            waiting.append(request)
            return .wait
        case .open:
            waiting.append(request)
            return .submit
        case .draining, .closed:
            end(request, unsentOutcome)
            return .ended
        }
    }

    /// A request waits and may be submitted now: the connection takes streams and fewer than `limit` are open.
    func canSubmit(limit: Int) -> Bool {
        takesStreams && streams.count < limit && !waiting.isEmpty
    }

    /// The next request to submit, while the connection takes streams and fewer than `limit` are open.
    mutating func nextToSubmit(limit: Int) -> PendingRequest? {
        guard takesStreams, streams.count < limit else { return nil }
        return waiting.popFirst()
    }

    /// `nghttp2_submit_request` gave the request stream `id`; an id that is not positive is nghttp2's refusal to
    /// make a stream for it (an error code): the request was not sent.
    mutating func submitted(_ request: PendingRequest, as id: Int32) {
        guard id > 0 else {
            end(request, .notSent)
            return
        }
        streams[id] = Stream(request: request)
        deadlineBound = min(deadlineBound ?? request.deadline, request.deadline)
    }

    /// Copies the next part of stream `id`'s request body, at most `buffer.count` bytes, into `buffer`;
    /// returns its size and whether it is the last part (a stream the machine no longer knows has nothing).
    mutating func nextBodyPart(stream id: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, last: Bool)
    {
        withStream(id) { stream in
            let sent = stream.bodySent
            let count = min(buffer.count, stream.request.request.body.count - sent)
            if count > 0 {
                stream.request.request.body.withUnsafeBytes { bytes in
                    buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[sent..<sent + count]))
                }
                stream.bodySent += count
            }
            return (count, stream.bodySent == stream.request.request.body.count)
        } ?? (0, true)
    }

    /// Runs `body` on stream `id`'s record where it is stored; nil when the machine does not know the stream.
    /// (`streams[id]` read as a value copies the whole record, a retain and a release per reference in it.)
    private mutating func withStream<Result>(_ id: Int32, _ body: (inout Stream) -> Result) -> Result? {
        guard let index = streams.index(forKey: id) else { return nil }
        return body(&streams.values[index])
    }

    /// The stream's HEADERS were handed to the socket.
    mutating func headersWritten(_ id: Int32) {
        streams[id]?.written = true
    }

    /// A submitted stream was never sent (nghttp2 dropped it, for example after GOAWAY).
    mutating func streamNotSent(_ id: Int32) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        if let goaway, id > goaway.lastStreamID {
            end(stream.request, .refusedByGoaway(alone: goaway.streamsOpen <= 1, stream: id))
        } else {
            end(stream.request, .notSent)
        }
    }

    // MARK: Receiving

    /// Bytes arrived: the connection is alive.
    mutating func received(now: Instant) {
        if case .open(var open) = state {
            open.lastActivity = now
            state = .open(open)
        }
    }

    /// A header field of an answer arrived.
    mutating func headerReceived(stream id: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>)
    {
        withStream(id) { stream in
            if name.first == UInt8(ascii: ":") {
                guard name.elementsEqual(":status".utf8) else { return }
                var status = 0
                for byte in value where byte >= 0x30 && byte <= 0x39 && status < 1000 {
                    status = status * 10 + Int(byte - 0x30)
                }
                if status >= 200 {
                    stream.status = status
                    stream.headers = []
                } else {
                    stream.status = nil  // informational: its fields are not the answer's
                }
                return
            }
            // Fields of an informational answer are skipped; past `maxResponseHeaderFields`, the rest.
            guard stream.status != nil, stream.headers.count < Self.maxResponseHeaderFields else { return }
            stream.headers.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        }
    }

    /// Part of an answer's body arrived.
    mutating func dataReceived(stream id: Int32, _ bytes: UnsafeBufferPointer<UInt8>) -> DataResult {
        withStream(id) { stream in
            guard !stream.tooLarge else { return .kept }
            guard stream.body.count + bytes.count <= Self.maxResponseBodyBytes else {
                stream.tooLarge = true
                return .cancel
            }
            stream.body.append(contentsOf: bytes)
            return .kept
        } ?? .kept
    }

    /// The answer on `id` ended (END_STREAM).
    mutating func answerEnded(stream id: Int32) {
        streams[id]?.ended = true
    }

    mutating func pingAnswered(now: Instant) {
        if case .open(var open) = state {
            open.pingSentAt = nil
            open.lastActivity = now
            state = .open(open)
        }
    }

    /// GOAWAY arrived: no new streams; streams above `lastStreamID` will be closed refused. The reason is read from
    /// `debugData` (``GoawayDebugData``).
    mutating func goawayReceived(lastStreamID: Int32, errorCode: UInt32, debugData: some Collection<UInt8>) {
        let reason = GoawayDebugData.reason(debugData)
        switch state {
        case .open, .draining(nil):
            let goaway = Goaway(
                lastStreamID: lastStreamID, errorCode: errorCode, reason: reason, streamsOpen: streams.count)
            let wasOpen = takesStreams
            state = .draining(goaway: goaway)
            sawGoaway = true
            events.append(HTTP2ClientEvent(.goaway, reason ?? StreamOutcome.name(ofErrorCode: errorCode)))
            if wasOpen { endWaiting() }
        case .draining(let earlier?):
            // A second GOAWAY may only lower the last stream id (RFC 9113 6.8).
            state = .draining(
                goaway: Goaway(
                    lastStreamID: min(earlier.lastStreamID, lastStreamID), errorCode: errorCode,
                    reason: reason ?? earlier.reason, streamsOpen: earlier.streamsOpen))
        case .paced, .connecting, .closed:
            break
        }
    }

    /// A stream ended, `errorCode` its RST_STREAM (or close) code. Returns how its request ended (nil
    /// for a stream the machine no longer knows: one it cancelled).
    @discardableResult
    mutating func streamClosed(_ id: Int32, errorCode: UInt32, now: Instant) -> StreamOutcome? {
        guard let stream = streams.removeValue(forKey: id) else { return nil }
        if case .open(var open) = state {
            open.lastActivity = now
            state = .open(open)
        }
        let outcome: StreamOutcome
        if stream.tooLarge {
            outcome = .tooLarge
        } else if stream.ended, let status = stream.status {
            outcome = .answered(status: status)
            let response = HTTP2Response(status: status, headers: stream.headers, body: stream.body)
            // An answer that retires the connection does not prove it: the pacing of reconnects ends only when a
            // new connection is proven, so connections that each end this way are not opened in a burst.
            if retiresConnection(response) {
                retiredByAnswer = true
                retire(.answer)
            } else if !proven && provesConnection(status) {
                proven = true
                events.append(HTTP2ClientEvent(.proven))
            }
            end(stream.request, outcome, response: response)
            return outcome
        } else if let goaway, id > goaway.lastStreamID {
            outcome = .refusedByGoaway(alone: goaway.streamsOpen <= 1, stream: id)
        } else if errorCode == Self.refusedStreamCode {
            outcome = .refusedStream
            retire(.refusedStream)
        } else if !stream.written {
            outcome = .notSent
        } else {
            outcome = .reset(code: errorCode)
        }
        end(stream.request, outcome)
        return outcome
    }

    // MARK: Time

    /// The timer fired: pacing over, connect timeout, deadlines, PING.
    mutating func timerFired(now: Instant) -> TimerResult {
        var result = TimerResult()
        switch state {
        case .paced:
            _ = expireWaiting(now: now)
            if start(now: now) == .connect { result.connect = true }
            return result
        case .connecting(let deadline):
            if deadline <= now {
                fail(.connectFailed, .cannotConnect, "connect timed out", detail: "connect timed out")
                result.close = true
                return result
            }
            // Still not connected by a request's deadline: presumed unreachable.
            if expireWaiting(now: now) {
                retire(.deadline)
                result.close = true
            }
            return result
        case .open(var open):
            result.cancel = expireStreams(now: now)
            _ = expireWaiting(now: now)
            if let sent = open.pingSentAt {
                if sent + timing.pingTimeout <= now {
                    events.append(HTTP2ClientEvent(.pingUnanswered))
                    lose("the connection did not answer PING")
                    result.cancel = []
                    result.close = true
                    return result
                }
            } else if streams.isEmpty && waiting.isEmpty && open.lastActivity + timing.pingInterval <= now {
                open.pingSentAt = now
                result.sendPing = true
            }
            state = .open(open)
            if !result.cancel.isEmpty { retire(.deadline) }
        case .draining:
            result.cancel = expireStreams(now: now)
        case .closed:
            break
        }
        return result
    }

    /// The latest instant by which `timerFired` must run (a deadline, pacing, PING due or unanswered).
    func nextWakeUp() -> Instant? {
        let requests = Self.earliest(streams.isEmpty ? nil : deadlineBound, waiting.earliestDeadline)
        switch state {
        case .paced(let until):
            return Self.earliest(until, waiting.earliestDeadline)
        case .connecting(let deadline):
            return min(deadline, requests ?? deadline)
        case .open(let open):
            let ping: Instant? =
                if let sent = open.pingSentAt {
                    sent + timing.pingTimeout
                } else if streams.isEmpty && waiting.isEmpty {
                    open.lastActivity + timing.pingInterval
                } else {
                    nil
                }
            return Self.earliest(requests, ping)
        case .draining:
            return requests
        case .closed:
            return nil
        }
    }

    private static func earliest(_ a: Instant?, _ b: Instant?) -> Instant? {
        guard let a else { return b }
        guard let b else { return a }
        return min(a, b)
    }

    /// Ends the streams past their deadline; returns their ids (to cancel).
    private mutating func expireStreams(now: Instant) -> [Int32] {
        guard let bound = deadlineBound, bound <= now else { return [] }
        var expired: [Int32] = []
        for (id, stream) in streams where stream.request.deadline <= now { expired.append(id) }
        expired.sort()
        for id in expired {
            let stream = streams.removeValue(forKey: id)!
            end(stream.request, .timedOut(written: stream.written))
        }
        deadlineBound = streams.values.lazy.map(\.request.deadline).min()
        return expired
    }

    /// Ends the waiting requests past their deadline; true if any.
    private mutating func expireWaiting(now: Instant) -> Bool {
        let expired = waiting.removeExpired(now: now)
        for request in expired { end(request, .timedOut(written: false)) }
        return !expired.isEmpty
    }

    // MARK: Ending

    /// The connection takes no new streams from now on (open streams may finish); what waits goes
    /// elsewhere, unsent.
    mutating func retire(_ cause: RetireCause) {
        switch state {
        case .open:
            state = .draining(goaway: nil)
            endWaiting()
        case .paced, .connecting:
            state = .closed(
                unsent: .connectFailed(
                    HTTP2ClientError(.connectionLost, "the connection was retired", mayHaveBeenProcessed: false)))
            endWaiting()
        case .draining, .closed:
            break
        }
    }

    /// The connection broke: every open stream ends (processed if written, unless GOAWAY said not),
    /// in stream order, and so does every request not yet sent.
    private mutating func lose(_ reason: String) {
        let goaway = self.goaway
        state = .closed(unsent: .notSent)
        for id in streams.keys.sorted() {
            let stream = streams[id]!
            if let goaway, id > goaway.lastStreamID {
                end(stream.request, .refusedByGoaway(alone: goaway.streamsOpen <= 1, stream: id))
            } else {
                end(stream.request, stream.written ? .lost(reason) : .notSent)
            }
        }
        streams = [:]
        deadlineBound = nil
        endWaiting()
    }

    /// The client shuts down: every request here ends with `.shutdown` (written or not), and the
    /// connection is closed. Returns them, oldest stream first, then those never submitted.
    mutating func shutDown() -> [PoolStateMachine.Ended] {
        var ended: [PoolStateMachine.Ended] = []
        for id in streams.keys.sorted() {
            let stream = streams[id]!
            ended.append(.init(request: stream.request, outcome: .shutdown(written: stream.written)))
        }
        for request in waiting.removeAll() { ended.append(.init(request: request, outcome: .shutdown(written: false))) }
        streams = [:]
        deadlineBound = nil
        state = .closed(unsent: .shutdown(written: false))
        return ended
    }

    /// Why a request given to the connection now fails here without being sent.
    var unsentOutcome: StreamOutcome {
        switch state {
        case .closed(let unsent): unsent
        case .paced, .connecting, .open, .draining: .notSent
        }
    }

    private mutating func endWaiting() {
        let outcome = unsentOutcome
        for request in waiting.removeAll() { end(request, outcome) }
    }

    private mutating func end(_ request: PendingRequest, _ outcome: StreamOutcome, response: HTTP2Response? = nil) {
        results.append(PoolStateMachine.Ended(request: request, outcome: outcome, response: response))
    }

    // MARK: The report

    /// The pool has something to learn: requests ended, events, or the connection's standing changed.
    var hasReport: Bool {
        !results.isEmpty || !events.isEmpty
            || (established, proven, isRetired) != reportedFlags
    }

    /// What the pool is told now (and forgets it).
    mutating func takeReport() -> PoolStateMachine.Report {
        reportedFlags = (established, proven, isRetired)
        let report = PoolStateMachine.Report(
            results: results, established: established, proven: proven, retire: isRetired, goaway: sawGoaway,
            retiredByAnswer: retiredByAnswer, events: events)
        results = []
        events = []
        return report
    }
}

extension ConnectionStateMachine.Failure {
    /// What a failure of the stream means for the connection: a proxy that gave no tunnel is said as the proxy's
    /// failure; the others by their kind.
    init(_ failure: ClientStreamFailure) {
        let text = failure.reason
        if let tunnel = failure.tunnel {
            self = .proxy(HTTP2ClientEvent.Kind(tunnel), text)
            return
        }
        switch failure.kind {
        case .resolve: self = .resolve(text)
        case .connect: self = .connect(text)
        case .certificate: self = .certificate(text)
        case .handshake: self = .handshake(text)
        case .closedByPeer: self = .broken(text, closedByPeer: true)
        case .reset, .tls: self = .broken(text, closedByPeer: false)
        }
    }
}

extension HTTP2ClientEvent.Kind {
    /// The event that says how the proxy failed to open the tunnel.
    init(_ tunnel: ClientStreamFailure.Tunnel) {
        switch tunnel {
        case .unreachable: self = .proxyUnreachable
        case .refused: self = .proxyRefused
        case .malformed: self = .proxyMalformed
        case .timeout: self = .proxyTimeout
        case .closed: self = .proxyClosed
        }
    }
}
