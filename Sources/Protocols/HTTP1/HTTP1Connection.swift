import MonotonicTime

/// One client connection's HTTP/1.1 state machine (docs/DESIGN.md, "The HTTP front"), pure: the shell that owns the
/// socket feeds it inputs (bytes read, the peer's end of stream, a deadline reached, the handler's decision and
/// answer, a write finished), each with the current instant, and carries out the ``Action`` it returns.
///
/// Requests are handled one at a time, in order: while the handler decides or answers, bytes of later requests are
/// buffered (up to ``Configuration/maxBufferedBytes``, then reading stops) and nothing else is read or answered for
/// this connection. Time is monotonic nanoseconds from any origin the shell chooses (its loop's clock).
///
/// Deadlines (`server.connection_timeout_s`, ``Configuration/timeout``) bound the idle wait before a request's
/// first byte, a head from its first byte to its end, a body from its start to its last byte, and the writing of
/// each answer; progress never extends one. The handler's own time has no deadline here.
public struct HTTP1Connection: Sendable {
    /// Limits and deadlines of a connection.
    public struct Configuration: Sendable, Equatable {
        /// The head's limits (target, head size, field lines).
        public var limits: HTTP1RequestParser.Limits
        /// `server.connection_timeout_s`: each deadline's length, in nanoseconds.
        public var timeout: UInt64
        /// How long a connection closing after a refusal keeps reading and dropping what the client still sends,
        /// so that the client reads its answer rather than a reset (lingering close), in nanoseconds.
        public var lingerTimeout: UInt64
        /// The most bytes of later requests held while one request is with its handler; more stop the reading.
        public var maxBufferedBytes: Int
        /// The largest declared body read and dropped, keeping the connection, when the handler answers from the
        /// head alone; a larger or chunked one gets the answer and a lingering close instead.
        public var discardableBodyBytes: Int
        /// A connection accepted over a cap: how long from its accept its request head may take before the
        /// connection closes unanswered (or `timeout`, if shorter), in nanoseconds.
        public var overCapHeadTimeout: UInt64
        /// A connection over a cap whose head is in: how long it waits for a connection to close and make room
        /// before it is answered 503 `overloaded`, in nanoseconds. A connection its client has closed reaches the
        /// worker that owns it a moment after the kernel has it, and another worker may accept the client's next
        /// connection meanwhile: this wait keeps that moment from refusing a client that never held more than its
        /// cap.
        public var roomWait: UInt64
        /// The most bytes a connection over a cap holds while it waits: its head (or the head's first bytes) and
        /// nothing more; reading stops there.
        public var overCapBufferBytes: Int
        /// The `Retry-After` seconds of the answer to a connection over a cap.
        public var overCapRetryAfterSeconds: Int
        /// When the server stops (``drain(now:)``), how long a request on its way still has for its head: a new
        /// connection's first request (the client sent it as its connection was accepted), or a head partly in.
        public var drainHeadWait: UInt64

        /// Creates a configuration; every limit has a production default.
        public init(
            limits: HTTP1RequestParser.Limits = HTTP1RequestParser.Limits(), timeout: UInt64 = 30_000_000_000,
            lingerTimeout: UInt64 = 2_000_000_000, maxBufferedBytes: Int = 64 * 1024,
            discardableBodyBytes: Int = 64 * 1024, overCapHeadTimeout: UInt64 = 1_000_000_000,
            roomWait: UInt64 = 250_000_000, overCapBufferBytes: Int = 4096, overCapRetryAfterSeconds: Int = 1,
            drainHeadWait: UInt64 = 1_000_000_000
        ) {
            self.limits = limits
            self.timeout = timeout
            self.lingerTimeout = lingerTimeout
            self.maxBufferedBytes = maxBufferedBytes
            self.discardableBodyBytes = discardableBodyBytes
            self.overCapHeadTimeout = overCapHeadTimeout
            self.roomWait = roomWait
            self.overCapBufferBytes = overCapBufferBytes
            self.overCapRetryAfterSeconds = overCapRetryAfterSeconds
            self.drainHeadWait = drainHeadWait
        }
    }

    /// What the handler is asked for; each is answered through an input of the machine.
    public enum HandUp: Sendable, Equatable {
        /// A head is in: decide with ``readBody(limit:now:)`` or answer with ``respond(_:now:)``, now or later
        /// (the request waits; nothing else is read or answered for the connection meanwhile).
        case head(HTTP1RequestHead)
        /// The request is complete: answer with ``respond(_:now:)``, now or later.
        case request(HTTP1RequestHead, body: [UInt8])
        /// The request is refused from its framing or size (`error.status`: 400, 414, 431, 501 or 505): answer
        /// with ``respond(_:now:)`` (the handler may count it; ``HTTP1Response/refusal(_:)`` is the plain answer).
        /// The head holds what was read of it; `followsHead`: the handler had the head already (``head(_:)``: it
        /// chose to read a body now refused), so a handler that counted the request then does not count it again.
        /// The connection then closes, lingering.
        case refused(HTTP1RequestHead, HTTP1ParseError, followsHead: Bool)
        /// The body is over the limit the handler chose in ``readBody(limit:now:)`` (declared over it, or a chunked
        /// body grown past it; `error.status` is 413): the handler's own answer for that, through
        /// ``respond(_:now:)``. It always follows ``head(_:)``. The connection then closes, lingering.
        case bodyTooLarge(HTTP1RequestHead, HTTP1ParseError)
        /// The connection was accepted over a cap (``init(configuration:now:overCap:)``) and its request head is in
        /// (or as much of it as the connection holds): is there room for it now? Answer with
        /// ``admission(room:now:)``, now and again whenever room may have come, while the machine waits. No room
        /// within ``Configuration/roomWait``: the machine answers 503 `overloaded` itself.
        case admission
    }

    /// What the shell does after an input. `deadline` and `isReading` are the connection's wishes as they stand
    /// (level, not edge): the shell moves its one timer and its reading to match.
    public struct Action: Sendable, Equatable {
        /// Bytes to write, after any earlier write; ``writeFinished(now:)`` follows once they are all written.
        /// There is never a second write before that.
        public var write: [UInt8]?
        /// A request for the handler, after ``write`` when both are set (a `100 Continue` and the request whose
        /// body was already in).
        public var handUp: HandUp?
        /// The instant at which ``deadlineReached(now:)`` is due, or nil for none.
        public var deadline: Instant?
        /// Whether to read from the socket.
        public var isReading: Bool
        /// Shut the write side (the answer before a lingering close is out; the client sees its end).
        public var shutdownWrite: Bool
        /// Close the socket now; the machine takes no more input.
        public var close: Bool
    }

    /// After an answer is written.
    enum AfterWrite: Sendable, Equatable {
        case nextRequest
        case close
        case linger
    }

    enum State: Sendable {
        /// Waiting for a request's first byte.
        case idle(deadline: Instant)
        case head(deadline: Instant)
        /// The head is with the handler.
        case deciding(HTTP1RequestHead)
        /// Reading a body: kept for the handler, or dropped before `answer` is written.
        case body(HTTP1RequestHead, deadline: Instant, answer: HTTP1Response?)
        /// The request is with the handler.
        case handling(HTTP1RequestHead)
        /// Over a cap, the head (or as much as is held of it) is in: waiting for room; `deadline` is nil until the
        /// first answer without room.
        case admitting(Admission, deadline: Instant?)
        /// A refusal is with the handler.
        case refusing(HTTP1RequestHead)
        /// The answer is being written.
        case answered(AfterWrite)
        case lingering(deadline: Instant)
        case closed
    }

    /// What a connection over a cap has read when it asks for room.
    enum Admission: Sendable {
        case head(HTTP1RequestHead)
        case refused(HTTP1ParseError, HTTP1RequestHead)
        /// The head is not complete: the connection holds its first ``Configuration/overCapBufferBytes``.
        case partial(deadline: Instant)
    }

    /// The configuration.
    public let configuration: Configuration
    /// The connection counts against the caps; false for one accepted over a cap, until room is found for it.
    public private(set) var admitted: Bool
    private var parser: HTTP1RequestParser
    private var state: State
    private var peerClosed = false
    /// Bytes queued and not yet handed to the shell, and whether a write is out.
    private var output: [UInt8] = []
    private var writing = false
    private var writeDeadline: Instant?
    private var pendingShutdown = false
    /// Set by ``drain(now:)``: the request in progress is the last.
    private var draining = false
    /// A request's first byte has come on this connection.
    private var begun = false

    /// A connection just accepted at `now`: the idle deadline runs from here. `overCap`: it was accepted over a cap
    /// (docs/DESIGN.md, "The HTTP front", Caps): it holds at most ``Configuration/overCapBufferBytes``, its head must
    /// come within ``Configuration/overCapHeadTimeout`` and then waits for room (``HandUp/admission``); without room
    /// it is answered 503 `overloaded` with `Retry-After` and `connection: close`, never reset.
    public init(configuration: Configuration = Configuration(), now: Instant, overCap: Bool = false) {
        self.configuration = configuration
        parser = HTTP1RequestParser(limits: configuration.limits)
        admitted = !overCap
        let wait = overCap ? min(configuration.timeout, configuration.overCapHeadTimeout) : configuration.timeout
        state = .idle(deadline: now + wait)
    }

    /// Whether the connection is closed (it takes no more input).
    public var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    /// Whether the connection, over a cap, waits for room (``HandUp/admission``).
    public var isAwaitingRoom: Bool {
        if case .admitting = state { return true }
        return false
    }

    /// The wishes as they stand, without an input (for example right after ``init(configuration:now:)``): the
    /// deadline and whether to read.
    public var current: Action {
        Action(
            write: nil, handUp: nil, deadline: deadline, isReading: wantsToRead, shutdownWrite: false, close: isClosed)
    }

    // MARK: - Inputs

    /// Bytes read from the socket (copied: the buffer may be reused as soon as this returns).
    public mutating func received(_ bytes: UnsafeRawBufferPointer, now: Instant) -> Action {
        switch state {
        case .closed, .lingering: return action(nil, now: now)
        default: break
        }
        parser.append(bytes)
        return advance(now)
    }

    /// Bytes read from the socket.
    public mutating func received(_ bytes: some Collection<UInt8>, now: Instant) -> Action {
        switch state {
        case .closed, .lingering: return action(nil, now: now)
        default: break
        }
        parser.append(contentsOf: bytes)
        return advance(now)
    }

    /// The peer ended its side (a read returned end of stream). Requests already in still get their answers; a
    /// request cut short closes the connection.
    public mutating func peerClosed(now: Instant) -> Action {
        peerClosed = true
        switch state {
        case .idle, .head, .body, .lingering:
            return close()
        case .deciding, .handling, .refusing, .answered, .admitting, .closed:
            return action(nil, now: now)
        }
    }

    /// The timer set for ``Action/deadline`` fired. A deadline passed closes the connection; an early or stale
    /// call changes nothing.
    public mutating func deadlineReached(now: Instant) -> Action {
        guard let due = deadline, now >= due else { return action(nil, now: now) }
        if case .admitting = state {
            // No room came in time: the request was not processed, and the client is told so.
            return refuseOverCap(now: now)
        }
        // A write that is not done, an idle or slow client, or the end of lingering: each ends the connection.
        return close()
    }

    /// The handler's decision after ``HandUp/head(_:)``: read the body, up to `limit` bytes.
    public mutating func readBody(limit: Int, now: Instant) -> Action {
        guard case .deciding(let head) = state else { return action(nil, now: now) }
        if let error = parser.readBody(limit: limit) {
            state = .refusing(head)
            return action(Self.refusal(head, error, followsHead: true), now: now)
        }
        // Sent even when body bytes are already in (RFC 9110, 10.1.1 allows either): what is written then depends
        // on the bytes alone, never on how the reads split them.
        if head.expectsContinue && head.hasBody {
            queue(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8), now: now)
        }
        state = .body(head, deadline: now + configuration.timeout, answer: nil)
        return advance(now)
    }

    /// The handler's answer: to a head (answered from the head alone), to a request, or to a refusal. A second
    /// answer to one request, or an answer when none is awaited, is ignored.
    public mutating func respond(_ response: HTTP1Response, now: Instant) -> Action {
        switch state {
        case .deciding(let head):
            guard head.hasBody else {
                // The parser passes the empty body, so that it stands at the next request.
                parser.readBody(limit: 0, keep: false)
                _ = parser.next()
                return answer(response, head, then: head.keepAlive ? .nextRequest : .close, now: now)
            }
            let length = head.contentLength ?? 0
            if head.isChunked || head.expectsContinue || length > configuration.discardableBodyBytes {
                // A body not worth reading, or one the client waits to be asked for: answer and close, lingering.
                return answer(response, head, then: .linger, now: now)
            }
            // A small body: dropped as it arrives, then the answer, on a connection that stays open.
            parser.readBody(limit: length, keep: false)
            state = .body(head, deadline: now + configuration.timeout, answer: response)
            return advance(now)
        case .handling(let head):
            return answer(response, head, then: head.keepAlive ? .nextRequest : .close, now: now)
        case .refusing(let head):
            return answer(response, head, then: .linger, now: now)
        case .idle, .head, .body, .answered, .lingering, .admitting, .closed:
            return action(nil, now: now)
        }
    }

    /// The answer to ``HandUp/admission``: whether the connection now counts against the caps (`room`). With room,
    /// the request goes on as on any connection; without, the connection waits for room until
    /// ``Configuration/roomWait`` has passed since its first answer without room, or is refused at once when it holds
    /// more than ``Configuration/overCapBufferBytes`` (it may not keep them while it waits).
    public mutating func admission(room: Bool, now: Instant) -> Action {
        guard case .admitting(let admission, let deadline) = state else { return action(nil, now: now) }
        guard room else {
            if parser.bufferedByteCount > configuration.overCapBufferBytes || draining {
                return refuseOverCap(now: now)
            }
            state = .admitting(admission, deadline: deadline ?? now + configuration.roomWait)
            return action(nil, now: now)
        }
        admitted = true
        switch admission {
        case .head(let head):
            state = .deciding(head)
            return action(.head(head), now: now)
        case .refused(let error, let head):
            state = .refusing(head)
            return action(.refused(head, error, followsHead: false), now: now)
        case .partial(let deadline):
            // The head keeps the deadline it had.
            state = .head(deadline: deadline)
            return advance(now)
        }
    }

    /// The server is stopping: the request in progress (if any) still gets its answer, with `connection: close`,
    /// and the connection then closes. A request on its way, a new connection's first or a head partly in, has
    /// ``Configuration/drainHeadWait`` for its head and is answered the same way (its client sent it to a server that
    /// had accepted the connection); a connection idle after its requests closes now; one waiting for room over a
    /// cap is answered 503 `overloaded`.
    public mutating func drain(now: Instant) -> Action {
        draining = true
        let wait = now + configuration.drainHeadWait
        switch state {
        case .idle(let deadline) where !begun:
            state = .idle(deadline: min(deadline, wait))
            return action(nil, now: now)
        case .head(let deadline):
            state = .head(deadline: min(deadline, wait))
            return action(nil, now: now)
        case .idle: return close()
        case .admitting: return refuseOverCap(now: now)
        default: return action(nil, now: now)
        }
    }

    /// The bytes of the last ``Action/write`` are all written.
    public mutating func writeFinished(now: Instant) -> Action {
        guard writing else { return action(nil, now: now) }
        writing = false
        if !output.isEmpty {
            return action(nil, now: now, write: takeOutput(now: now))
        }
        writeDeadline = nil
        guard case .answered(let after) = state else { return action(nil, now: now) }
        switch after {
        case .nextRequest:
            state = .idle(deadline: now + configuration.timeout)
            return advance(now)
        case .close where parser.bufferedByteCount == 0:
            return close()
        case .close, .linger:
            // Bytes the client sent that were not read would make the close a reset, which can destroy the answer
            // before the client reads it: shut the write side and drop what comes, for a short while.
            if peerClosed { return close() }
            state = .lingering(deadline: now + configuration.lingerTimeout)
            pendingShutdown = true
            return action(nil, now: now)
        }
    }

    // MARK: - Steps

    /// Parses what the buffer holds as far as the state allows.
    private mutating func advance(_ now: Instant) -> Action {
        while true {
            switch state {
            case .idle:
                guard parser.bufferedByteCount > 0 else {
                    return peerClosed ? close() : action(nil, now: now)
                }
                // The head's deadline runs from its first byte, or, for a pipelined head already buffered, from
                // the moment the connection turns to it; over a cap, from the accept; while the server stops, from
                // the drain.
                begun = true
                if case .idle(let deadline) = state, !admitted || draining {
                    state = .head(deadline: deadline)
                } else {
                    state = .head(deadline: now + configuration.timeout)
                }
            case .head(let deadline):
                switch parser.next() {
                case .needMoreBytes:
                    if peerClosed { return close() }
                    if !admitted && parser.bufferedByteCount >= configuration.overCapBufferBytes {
                        state = .admitting(.partial(deadline: deadline), deadline: nil)
                        return action(.admission, now: now)
                    }
                    return action(nil, now: now)
                case .head(let head) where !admitted:
                    state = .admitting(.head(head), deadline: nil)
                    return action(.admission, now: now)
                case .refused(let error, let head) where !admitted:
                    state = .admitting(.refused(error, head), deadline: nil)
                    return action(.admission, now: now)
                case .head(let head):
                    state = .deciding(head)
                    return action(.head(head), now: now)
                case .refused(let error, let head):
                    state = .refusing(head)
                    return action(.refused(head, error, followsHead: false), now: now)
                case .body:
                    // Not after a head scan; treated as the protocol error it would be.
                    return close()
                }
            case .body(let head, _, let answer):
                switch parser.next() {
                case .needMoreBytes:
                    return peerClosed ? close() : action(nil, now: now)
                case .body(let body):
                    if let answer {
                        return self.answer(answer, head, then: head.keepAlive ? .nextRequest : .close, now: now)
                    }
                    state = .handling(head)
                    return action(.request(head, body: body), now: now)
                case .refused(let error, let partial):
                    let known = partial.method.isEmpty ? head : partial
                    state = .refusing(known)
                    // A body read for an answer given from the head alone: that answer stands for the request.
                    return action(Self.refusal(known, error, followsHead: answer == nil), now: now)
                case .head:
                    return close()
                }
            case .deciding, .handling, .refusing, .answered, .lingering, .admitting, .closed:
                return action(nil, now: now)
            }
        }
    }

    /// The answer to a connection over a cap that found no room: 503 `overloaded` with `Retry-After` and
    /// `connection: close`, then a lingering close (what the client sends meanwhile is read and dropped, so that it
    /// reads its answer rather than a reset). The bytes held are dropped now.
    private mutating func refuseOverCap(now: Instant) -> Action {
        parser = HTTP1RequestParser(limits: configuration.limits)
        let answer = HTTP1Response.overloaded(retryAfter: configuration.overCapRetryAfterSeconds)
        queue(answer.serialized(close: true), now: now)
        state = .answered(.linger)
        return action(nil, now: now)
    }

    /// The hand-up for a refusal: a body over the handler's limit has its own answer.
    private static func refusal(_ head: HTTP1RequestHead, _ error: HTTP1ParseError, followsHead: Bool) -> HandUp {
        error.code == .bodyTooLarge ? .bodyTooLarge(head, error) : .refused(head, error, followsHead: followsHead)
    }

    private mutating func answer(
        _ response: HTTP1Response, _ head: HTTP1RequestHead, then after: AfterWrite, now: Instant
    ) -> Action {
        let after = draining && after == .nextRequest ? .close : after
        let closing = after != .nextRequest
        queue(
            response.serialized(
                close: closing, keepAliveHTTP10: !closing && head.version == .http10, headRequest: head.method == "HEAD"
            ),
            now: now)
        state = .answered(after)
        return action(nil, now: now)
    }

    private mutating func queue(_ bytes: [UInt8], now: Instant) {
        if output.isEmpty {
            output = bytes
        } else {
            output.append(contentsOf: bytes)
        }
    }

    /// Hands the queued bytes to the shell; the client has `timeout` to read them (a new deadline per write: each
    /// is one answer, or a `100 Continue`).
    private mutating func takeOutput(now: Instant) -> [UInt8] {
        writing = true
        writeDeadline = now + configuration.timeout
        let bytes = output
        output = []
        return bytes
    }

    private mutating func close() -> Action {
        state = .closed
        output = []
        writeDeadline = nil
        return current
    }

    /// The deadline in force: the write's, or the state's, whichever comes first.
    private var deadline: Instant? {
        let stateDeadline: Instant?
        switch state {
        case .idle(let deadline), .head(let deadline), .body(_, let deadline, _), .lingering(let deadline):
            stateDeadline = deadline
        case .admitting(_, let deadline):
            stateDeadline = deadline
        case .deciding, .handling, .refusing, .answered, .closed:
            stateDeadline = nil
        }
        switch (stateDeadline, writeDeadline) {
        case (let a?, let b?): return min(a, b)
        case (let a?, nil): return a
        case (nil, let b): return b
        }
    }

    private var wantsToRead: Bool {
        if peerClosed { return false }
        switch state {
        case .closed, .admitting: return false
        case .idle where !admitted, .head where !admitted:
            return parser.bufferedByteCount < configuration.overCapBufferBytes
        case .idle, .head, .body, .lingering: return true
        case .deciding, .handling, .refusing, .answered:
            return parser.bufferedByteCount < configuration.maxBufferedBytes
        }
    }

    /// The action after an input: the hand-up, any write due (one at a time), and the wishes as they stand.
    private mutating func action(_ handUp: HandUp?, now: Instant, write: [UInt8]? = nil) -> Action {
        var write = write
        if write == nil && !writing && !output.isEmpty, !isClosed {
            write = takeOutput(now: now)
        }
        let shutdown = pendingShutdown
        pendingShutdown = false
        return Action(
            write: write, handUp: handUp, deadline: deadline, isReading: wantsToRead, shutdownWrite: shutdown,
            close: isClosed)
    }
}
