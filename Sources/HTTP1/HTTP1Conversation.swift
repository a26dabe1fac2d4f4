import MonotonicTime

/// A server connection's dealings with its handler around an ``HTTP1Connection``, pure: which question the handler is
/// asked, what its decisions mean, and the order in which inputs reach the connection machine. The shell (the socket's
/// delegate) gives it every input with the current instant and carries out each ``Action`` it returns, one at a time.
///
/// Inputs never nest: one that comes while an action is carried out (an answer given inside a handler call, a write
/// done at once) is queued, and reaches the machine once the shell reports the action done (``actionDone(now:)``).
/// While a head decision is awaited (``Decision/later``), the request waits; bytes of later requests stay in the
/// machine's buffer.
public struct HTTP1Conversation: Sendable {
    /// The handler's decision on a head.
    public enum Decision: Sendable, Equatable {
        /// Answer from the head alone.
        case respond(HTTP1Response)
        /// Read the body, up to `limit` bytes, then ask ``Question/request(_:body:)``.
        case readBody(limit: Int)
        /// The decision comes later, through ``decidedLater(_:now:)``; a later decision that is `later` again is
        /// an internal error, answered 500.
        case later
    }

    /// What the handler is asked; each is answered through an input.
    public enum Question: Sendable, Equatable {
        /// A head is in: answer with ``decide(_:now:)``.
        case head(HTTP1RequestHead)
        /// The request is complete: answer with ``respond(_:now:)``, now or later.
        case request(HTTP1RequestHead, body: [UInt8])
        /// The body is over the limit the handler chose (declared over it, or a chunked body grown past it): the
        /// handler's answer for that, through ``respond(_:now:)``. The connection then closes, lingering.
        case bodyTooLarge(HTTP1RequestHead)
        /// Refused from its framing or size (`error.status`: 400, 414, 431, 501 or 505): the handler's answer through
        /// ``respond(_:now:)``; `followsHead` as in ``HTTP1Connection/HandUp/refused(_:_:followsHead:)``.
        case refused(HTTP1RequestHead, HTTP1ParseError, followsHead: Bool)
    }

    /// What the shell does: the connection machine's action (its `handUp` is always nil here), then asks `ask`.
    public struct Action: Sendable, Equatable {
        /// Writing, the timer, reading, shutting and closing, as ``HTTP1Connection/Action`` says.
        public var connection: HTTP1Connection.Action
        /// The question for the handler, after `connection` is carried out.
        public var ask: Question?
    }

    /// An input queued while an action is carried out.
    enum Input: Sendable, Equatable {
        case received([UInt8])
        case peerClosed
        case deadlineReached
        case writeFinished
        case respond(HTTP1Response)
        case decide(Decision)
        case decidedLater(Decision)
        /// The wishes as they stand (after a drain while an action was carried out).
        case current
    }

    /// The answer to a head decided `later` twice: an internal error.
    public static let laterAgain = HTTP1Response(status: 500)

    /// The connection machine.
    public private(set) var connection: HTTP1Connection
    private var queued: [Input] = []
    /// An action is out with the shell, not yet reported done.
    private(set) var busy = false
    /// The head's decision is awaited (``Decision/later``).
    public private(set) var awaitingDecision = false

    /// A connection just accepted at `now`.
    public init(configuration: HTTP1Connection.Configuration = HTTP1Connection.Configuration(), now: Instant) {
        connection = HTTP1Connection(configuration: configuration, now: now)
    }

    // MARK: - Inputs

    /// The first action: the wishes of a new connection (reading, the idle deadline), or its close when the server
    /// is stopping already.
    public mutating func start(draining: Bool, now: Instant) -> Action {
        if draining { _ = connection.drain(now: now) }
        return hand(out: connection.current)
    }

    /// Bytes read from the socket (copied if they must wait).
    public mutating func received(_ bytes: UnsafeRawBufferPointer, now: Instant) -> Action? {
        if busy {
            queued.append(.received(Array(bytes)))
            return nil
        }
        return hand(out: connection.received(bytes, now: now))
    }

    /// The peer ended its side.
    public mutating func peerClosed(now: Instant) -> Action? { take(.peerClosed, now: now) }

    /// The timer set for the action's deadline fired.
    public mutating func deadlineReached(now: Instant) -> Action? { take(.deadlineReached, now: now) }

    /// The last action's bytes are all written.
    public mutating func writeFinished(now: Instant) -> Action? { take(.writeFinished, now: now) }

    /// The handler's answer to ``Question/request(_:body:)``, ``Question/bodyTooLarge(_:)`` or
    /// ``Question/refused(_:_:followsHead:)``.
    public mutating func respond(_ response: HTTP1Response, now: Instant) -> Action? {
        take(.respond(response), now: now)
    }

    /// The handler's decision on ``Question/head(_:)``, as its call returns.
    public mutating func decide(_ decision: Decision, now: Instant) -> Action? { take(.decide(decision), now: now) }

    /// The decision that came later; ignored unless one is awaited.
    public mutating func decidedLater(_ decision: Decision, now: Instant) -> Action? {
        take(.decidedLater(decision), now: now)
    }

    /// The server is stopping: the request in progress is the last. While an action is carried out, the flag is
    /// set at once (the answer being made reads it) and the wishes follow once the action is done.
    public mutating func drain(now: Instant) -> Action? {
        guard busy else { return hand(out: connection.drain(now: now)) }
        _ = connection.drain(now: now)
        queued.append(.current)
        return nil
    }

    /// The shell has carried out the last action: the next one, from an input that came meanwhile, or nil when there
    /// is none (the shell then waits for its next input).
    public mutating func actionDone(now: Instant) -> Action? {
        while !queued.isEmpty {
            if let action = step(queued.removeFirst(), now: now) { return hand(out: action) }
        }
        busy = false
        return nil
    }

    // MARK: - Steps

    private mutating func take(_ input: Input, now: Instant) -> Action? {
        if busy {
            queued.append(input)
            return nil
        }
        guard let action = step(input, now: now) else { return nil }
        return hand(out: action)
    }

    /// The machine's action for an input, or nil when it changes nothing for the shell.
    private mutating func step(_ input: Input, now: Instant) -> HTTP1Connection.Action? {
        switch input {
        case .received(let bytes): return connection.received(bytes, now: now)
        case .peerClosed: return connection.peerClosed(now: now)
        case .deadlineReached: return connection.deadlineReached(now: now)
        case .writeFinished: return connection.writeFinished(now: now)
        case .respond(let response): return connection.respond(response, now: now)
        case .current: return connection.current
        case .decide(.later):
            awaitingDecision = true
            return nil
        case .decide(let decision):
            return apply(decision, now: now)
        case .decidedLater(let decision):
            guard awaitingDecision else { return nil }
            awaitingDecision = false
            return apply(decision, now: now)
        }
    }

    private mutating func apply(_ decision: Decision, now: Instant) -> HTTP1Connection.Action {
        switch decision {
        case .respond(let response): connection.respond(response, now: now)
        case .readBody(let limit): connection.readBody(limit: limit, now: now)
        case .later: connection.respond(Self.laterAgain, now: now)
        }
    }

    /// The action for the shell; it is out until ``actionDone(now:)``.
    private mutating func hand(out action: HTTP1Connection.Action) -> Action {
        busy = true
        var action = action
        let handUp = action.handUp
        action.handUp = nil
        return Action(connection: action, ask: handUp.map(Self.question))
    }

    /// The question for a hand-up: a body over the handler's limit has its own answer.
    static func question(_ handUp: HTTP1Connection.HandUp) -> Question {
        switch handUp {
        case .head(let head): .head(head)
        case .request(let head, let body): .request(head, body: body)
        case .refused(let head, let error, _) where error.code == .bodyTooLarge: .bodyTooLarge(head)
        case .refused(let head, let error, let followsHead): .refused(head, error, followsHead: followsHead)
        }
    }
}
