import MonotonicTime

/// A server connection's dealings with its handler around an ``HTTP1Connection``, pure: what the handler's decisions
/// mean, and the order in which inputs reach the connection machine. The shell (the socket's delegate) gives it every
/// input with the current instant and carries out each ``HTTP1Connection/Action`` it returns, one at a time (its
/// ``HTTP1Connection/HandUp`` is the handler's question).
///
/// Inputs never nest: one that comes while an action is carried out (an answer given inside a handler call, a write
/// done at once) is queued, and reaches the machine once the shell reports the action done (``actionDone(_:now:)``).
/// While a head decision is awaited (``Decision/later``), the request waits; bytes of later requests stay in the
/// machine's buffer.
public struct HTTP1Conversation: Sendable {
    /// The handler's decision on a head.
    public enum Decision: Sendable, Equatable {
        /// Answer from the head alone.
        case respond(HTTP1Response)
        /// Read the body, up to `limit` bytes, then hand up the request.
        case readBody(limit: Int)
        /// The decision comes later, through ``decidedLater(_:now:)``; a later decision that is `later` again is
        /// an internal error, answered 500.
        case later
    }

    /// An input queued while an action is carried out.
    @usableFromInline
    enum Input: Sendable, Equatable {
        case received([UInt8])
        case peerClosed
        case deadlineReached
        case writeFinished
        case respond(HTTP1Response)
        case decide(Decision)
        case decidedLater(Decision)
        case admission(room: Bool)
        /// The wishes as they stand (after a drain while an action was carried out).
        case current
    }

    /// The answer to a head decided `later` twice: an internal error.
    public static let laterAgain = HTTP1Response(status: 500)

    // The inputs of a push (bytes, a write done, an answer) and `actionDone` are inlinable: inlined into the shell, the
    // machine's action reaches it without another copy; hence the internal names below.

    /// The connection machine.
    public var connection: HTTP1Connection { machine }
    @usableFromInline
    var machine: HTTP1Connection
    @usableFromInline
    var queued: [Input] = []
    /// An action is out with the shell, not yet reported done.
    @usableFromInline
    private(set) var busy = false
    /// The head's decision is awaited (``Decision/later``).
    public private(set) var awaitingDecision = false

    /// A connection just accepted at `now` (`overCap`: over a cap; see ``HTTP1Connection/init(configuration:now:overCap:)``).
    public init(
        configuration: HTTP1Connection.Configuration = HTTP1Connection.Configuration(), now: Instant,
        overCap: Bool = false
    ) {
        machine = HTTP1Connection(configuration: configuration, now: now, overCap: overCap)
    }

    // MARK: - Inputs

    /// The first action: the wishes of a new connection (reading, the idle deadline), or its close when the server
    /// is stopping already.
    public mutating func start(draining: Bool, now: Instant) -> HTTP1Connection.Action {
        if draining { _ = machine.drain(now: now) }
        busy = true
        return machine.current
    }

    /// Bytes read from the socket (copied if they must wait).
    @inlinable
    public mutating func received(_ bytes: UnsafeRawBufferPointer, now: @autoclosure () -> Instant) -> HTTP1Connection
        .Action?
    {
        guard wait(or: .received(Array(bytes))) else { return nil }
        return machine.received(bytes, now: now())
    }

    /// The peer ended its side.
    public mutating func peerClosed(now: @autoclosure () -> Instant) -> HTTP1Connection.Action? {
        guard wait(or: .peerClosed) else { return nil }
        return machine.peerClosed(now: now())
    }

    /// The timer set for the action's deadline fired.
    public mutating func deadlineReached(now: @autoclosure () -> Instant) -> HTTP1Connection.Action? {
        guard wait(or: .deadlineReached) else { return nil }
        return machine.deadlineReached(now: now())
    }

    /// The last action's bytes are all written.
    @inlinable
    public mutating func writeFinished(now: @autoclosure () -> Instant) -> HTTP1Connection.Action? {
        guard wait(or: .writeFinished) else { return nil }
        return machine.writeFinished(now: now())
    }

    /// The handler's answer to a request, a body too large or a refusal.
    @inlinable
    public mutating func respond(_ response: HTTP1Response, now: @autoclosure () -> Instant) -> HTTP1Connection.Action?
    {
        guard wait(or: .respond(response)) else { return nil }
        return machine.respond(response, now: now())
    }

    /// The handler's decision on a head, as its call returns.
    public mutating func decide(_ decision: Decision, now: @autoclosure () -> Instant) -> HTTP1Connection.Action? {
        take(.decide(decision), now: now)
    }

    /// The decision that came later; ignored unless one is awaited.
    public mutating func decidedLater(_ decision: Decision, now: @autoclosure () -> Instant) -> HTTP1Connection.Action?
    {
        take(.decidedLater(decision), now: now)
    }

    /// Whether there is room for a connection over a cap (the answer to ``HTTP1Connection/HandUp/admission``, or
    /// a later try while it waits).
    public mutating func admission(room: Bool, now: @autoclosure () -> Instant) -> HTTP1Connection.Action? {
        guard wait(or: .admission(room: room)) else { return nil }
        return machine.admission(room: room, now: now())
    }

    /// The server is stopping: the request in progress is the last. While an action is carried out, the flag is
    /// set at once (the answer being made reads it) and the wishes follow once the action is done.
    public mutating func drain(now: Instant) -> HTTP1Connection.Action? {
        let action = machine.drain(now: now)
        guard wait(or: .current) else { return nil }
        return action
    }

    /// The shell has carried out the last action: the next one, from an input that came meanwhile, is put in
    /// `action` (true), or there is none (false; the shell then waits for its next input). The clock is read only for
    /// an input that waits.
    @inlinable
    public mutating func actionDone(_ action: inout HTTP1Connection.Action, now: @autoclosure () -> Instant) -> Bool {
        while !queued.isEmpty {
            if step(queued.removeFirst(), into: &action, now: now()) { return true }
        }
        busy = false
        return false
    }

    // MARK: - Steps

    /// The action for an input that may change nothing (a decision), or nil; queued while an action is out.
    private mutating func take(_ input: Input, now: () -> Instant) -> HTTP1Connection.Action? {
        guard !busy else {
            queued.append(input)
            return nil
        }
        var action = machine.current
        guard step(input, into: &action, now: now()) else { return nil }
        busy = true
        return action
    }

    /// Whether the input goes to the machine now (the action it leads to is then out with the shell); else it is
    /// queued until the action out is done.
    @inlinable
    mutating func wait(or input: @autoclosure () -> Input) -> Bool {
        if busy {
            queued.append(input())
            return false
        }
        busy = true
        return true
    }

    /// Puts the machine's action for an input in `action`; false when the input changes nothing for the shell.
    @usableFromInline
    mutating func step(_ input: Input, into action: inout HTTP1Connection.Action, now: Instant) -> Bool {
        switch input {
        case .received(let bytes): action = machine.received(bytes, now: now)
        case .peerClosed: action = machine.peerClosed(now: now)
        case .deadlineReached: action = machine.deadlineReached(now: now)
        case .writeFinished: action = machine.writeFinished(now: now)
        case .respond(let response): action = machine.respond(response, now: now)
        case .current: action = machine.current
        case .admission(let room): action = machine.admission(room: room, now: now)
        case .decide(.later):
            awaitingDecision = true
            return false
        case .decide(let decision):
            action = apply(decision, now: now)
        case .decidedLater(let decision):
            guard awaitingDecision else { return false }
            awaitingDecision = false
            action = apply(decision, now: now)
        }
        return true
    }

    private mutating func apply(_ decision: Decision, now: Instant) -> HTTP1Connection.Action {
        switch decision {
        case .respond(let response): machine.respond(response, now: now)
        case .readBody(let limit): machine.readBody(limit: limit, now: now)
        case .later: machine.respond(Self.laterAgain, now: now)
        }
    }
}
