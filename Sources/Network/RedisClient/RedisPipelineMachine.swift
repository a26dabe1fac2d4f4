import MonotonicTime

/// The logic of one pipelined Redis connection that runs one Lua script, without I/O, C or a clock of its own:
/// the shell (``RedisPipeline``) feeds it what happened (connected, bytes parsed into replies, a timer fired, the
/// stream failed) with the time, and carries out what each input returns (write the pending output, connect,
/// close, answer these requests).
///
/// - Set-up: once connected, `AUTH`, `ROLE`, `SELECT` and `SCRIPT LOAD` go out in one write and their replies are
///   checked in order, all within the connect timeout. A server that `ROLE` names a replica is left at once: behind an
///   address that follows the primary (a managed endpoint, a DNS name) a connection may still reach the old one.
/// - A server that cannot count (``RedisClientError/notPrimary``: `READONLY` from a demoted primary, which keeps its
///   clients' connections; `LOADING`; `MASTERDOWN`) is treated as lost: its calls fail (the caller decides without
///   the store), the connection is closed and a new one made after the reconnection delay.
/// - A server that answers a call with another error keeps the connection, but is reported as failing
///   (``RedisPipelineEvent/failing(_:)``) until a call is answered again: decisions are not being made in it.
/// - Calls: requests queue until the next write, when they leave as calls of the script (`EVALSHA`), each carrying
///   up to ``Configuration/maximumBatch`` requests that the shell's formatter may join, with a tag the machine gives
///   it; the script returns that tag first and then one answer per request, so a reply is matched to its call by
///   order and by tag, and to its requests by position. One call costs Redis one script run however many requests
///   it decides (a run with its `TIME` is most of a lone request's cost).
/// - Batching: a request is written with the next write on an idle connection (the shell writes once per turn of
///   its loop); while others are in flight to a near server (recent round trip at most
///   ``Configuration/batchingRoundTrip``), it waits for the next replies, and everything that queued meanwhile
///   leaves in one write.
/// - Deadlines: no request waits past ``Configuration/timeout``; a request that does drops the connection (a late
///   reply would answer nobody), failing every request in flight.
/// - NOSCRIPT (the server lost its scripts): the script is loaded again and the call sent once more.
/// - Reconnection: 50 ms doubling to 5 s, with up to a fifth more of jitter; a loss and a return are each
///   reported once (``RedisPipelineEvent``), however many attempts fail in between.
///
/// - Sentinel: with ``Configuration/sentinel``, a ``SentinelMachine`` is composed in. Each attempt first asks it where
///   the primary is (the connect timeout covers the asking too), and connects where it says; a round in which no
///   sentinel answers is a failed attempt; a move it announces (`+switch-master`) leaves the server like `READONLY`;
///   a loss tells it the primary it named is lost, and ends a round under way. One deadline covers both.
/// - Requests from another thread are taken only while connected; one that reaches the loop after a loss is answered
///   ``RedisClientError/unavailable`` (its caller was told it was taken).
///
/// `Request` is whatever the shell answers a request through (its completion); the machine only holds it.
struct RedisPipelineMachine<Request> {
    struct Configuration {
        /// How long a request may wait for its reply (nanoseconds).
        var timeout: UInt64
        /// How long connecting, TLS and the set-up commands may take together (nanoseconds).
        var connectTimeout: UInt64
        /// The set-up commands, formatted, in the order they are sent; the last is `SCRIPT LOAD`.
        var setUp: [SetUpCommand]
        /// `SCRIPT LOAD` of the script, formatted (sent again after NOSCRIPT).
        var scriptLoad: [UInt8]
        /// The script's SHA-1 in lowercase hex, as `SCRIPT LOAD` answers it.
        var scriptDigest: [UInt8]
        /// The longest recent round trip at which requests wait for the replies in flight rather than go out
        /// at once: a Redis on the same host or in the same rack (nanoseconds).
        var batchingRoundTrip: UInt64 = 250_000
        /// The most requests one call carries: Redis runs a script alone, so a call must stay short (a request
        /// takes it a few microseconds).
        var maximumBatch = 32
        /// The server connected to (unused with ``sentinel``).
        var server = SentinelMachine.Node(host: "127.0.0.1", port: 6379)
        /// Redis Sentinel: who names the primary before each attempt; nil: ``server``.
        var sentinel: SentinelMachine.Configuration?
    }

    struct SetUpCommand {
        enum Kind: Equatable {
            case auth, role, select, scriptLoad
        }
        var kind: Kind
        var bytes: [UInt8]
    }

    /// What the shell does after an input about the connections: in this order, handle a loss, act on the sentinel's
    /// connection, connect to a server.
    struct Step {
        /// The connection ended (or an attempt failed): ``Loss``.
        var loss: Loss?
        /// The connection to a sentinel (``SentinelMachine/Action/Stream``; `.write`: write ``sentinelOutput``).
        var sentinel = SentinelMachine.Action.Stream.none
        /// Connect to this server: a new reply reader, the stream connected and handshaken, then ``connected(now:)``.
        var connect: SentinelMachine.Node?
    }

    /// A connection that ended, and what the shell does about it.
    struct Loss {
        /// Why; every request in ``failed`` is answered with it.
        var error: RedisClientError
        var failed: [Request]
        /// `.lost` when this loss is the first since the pipeline was last connected.
        var event: RedisPipelineEvent?
        /// When the next attempt is made (``timerFired(now:)`` returns `.connect` then).
        var retryAt: Instant
        /// The server the loss concerns (for the event); nil: none was reached.
        var server: SentinelMachine.Node?
        /// A round of asking the sentinels was under way for the attempt: close the connection to the sentinel.
        var closeSentinel = false
    }

    enum SubmitResult: Equatable {
        /// Not connected (or stopped): nothing was taken; the caller decides without the store.
        case refused
        /// A request that came from another thread while connected, and found the connection gone: answer it now with
        /// this error (its caller was told it was taken).
        case answer(RedisClientError)
        /// Write the pending output now.
        case flush
        /// Taken; it leaves with the next write (after the replies in flight).
        case deferred
    }

    /// A request's answer, and how long it waited (nanoseconds).
    struct Answer {
        var request: Request
        var result: Result<RedisScriptAnswer, RedisClientError>
        var latency: UInt64
    }

    enum ReplyResult {
        /// The answers of one call's requests, in their order; `event`: `.failing` when the call failed and the
        /// one before did not, `.connected` when it was answered after calls failed.
        case answers([Answer], event: RedisPipelineEvent?)
        /// The set-up has finished: requests are taken from now on (`event`: `.connected`, when it is news).
        case ready(RedisPipelineEvent?)
        /// NOSCRIPT: the script's load and the call again are in the output: write it.
        case reloading
        /// Nothing to do (a set-up step or a reloaded script acknowledged; a reply on no connection).
        case none
        /// The reply broke the protocol or the set-up failed: close the connection.
        case lost(Loss)
    }

    enum TimerResult {
        case none
        /// Time for the next attempt: connect (the connect timeout runs from now).
        case connect
        /// A deadline passed (a request's, or the connect timeout): close the connection.
        case lost(Loss)
    }

    private enum State {
        case idle
        case waiting(until: Instant)
        /// Asking the sentinels where the primary is.
        case locating(deadline: Instant)
        case connecting(deadline: Instant)
        case settingUp(deadline: Instant, step: Int)
        case ready
        case stopped
    }

    /// A request not yet written, or one of a call's.
    private struct Member {
        var request: Request
        var submitted: Instant
    }

    /// A call written and not yet answered.
    private struct InFlight {
        /// Empty: a `SCRIPT LOAD` sent after NOSCRIPT, whose reply answers nobody.
        var members: [Member]
        var tag: UInt64
        var command: [UInt8]
        /// The oldest member's.
        var deadline: Instant
        var retried: Bool
    }

    let configuration: Configuration
    private var state = State.idle
    /// With ``Configuration/sentinel``: who names the primary.
    private var sentinel: SentinelMachine?
    /// The server of the attempt under way or of the last connection (for the events); nil before any, and with a
    /// sentinel, until it names one.
    private(set) var server: SentinelMachine.Node?
    /// Bytes not yet handed to the stream.
    private(set) var output: [UInt8] = []
    /// Requests taken and not yet in a call, oldest first.
    private var queued: [Member] = []
    /// Calls written (or in ``output``) and not yet answered, oldest first: replies come in this order.
    private var inFlight: [InFlight] = []
    private var inFlightHead = 0
    /// Requests in the calls of ``inFlight``.
    private var inFlightRequests = 0
    /// Calls in flight sent again after NOSCRIPT: they wait behind later calls, whose deadlines are later.
    private var retriedInFlight = 0
    private var nextTag: UInt64 = 1
    /// Failed attempts since the last connection was ready (the reconnection delay grows with them).
    private var failures = 0
    /// The last event reported: nil before any.
    private var reported: Reported?
    private enum Reported {
        case up, failing, down
    }
    /// The last server was left for not being a writable primary: the next is taken for one (reported connected,
    /// the reconnection delay reset) only once `ROLE` says so or a call is answered, so that a server that keeps
    /// answering `READONLY` is not announced and left again at every attempt.
    private var unproven = false
    /// The recent round trip (a moving average of the shortest wait of each read's replies); nil before any.
    private var roundTrip: UInt64?
    private var shortestInRead: UInt64?
    private var random: JitterGenerator

    /// - Parameter seed: the reconnection jitter's seed (a test gives a fixed one).
    init(configuration: Configuration, seed: UInt64) {
        self.configuration = configuration
        sentinel = configuration.sentinel.map(SentinelMachine.init(configuration:))
        random = JitterGenerator(state: seed)
    }

    /// Requests are taken (connected, set up, not stopped).
    var isReady: Bool {
        if case .ready = state { true } else { false }
    }

    /// Waiting for the stream to connect (the shell may first have to learn where the server is).
    var isConnecting: Bool {
        if case .connecting = state { true } else { false }
    }

    var isStopped: Bool {
        if case .stopped = state { true } else { false }
    }

    /// Requests written or waiting to be, not yet answered.
    var inFlightCount: Int { inFlightRequests + queued.count }

    /// The earliest time at which ``timerFired(now:)`` has something to do: the oldest request's deadline, the
    /// connect timeout, or the next attempt. The shell keeps one timer at (or before) it.
    var nextDeadline: Instant? {
        guard let sentinelDeadline = sentinel?.nextDeadline else { return connectionDeadline }
        return connectionDeadline.map { min($0, sentinelDeadline) } ?? sentinelDeadline
    }

    /// The connection's part of ``nextDeadline``.
    private var connectionDeadline: Instant? {
        switch state {
        case .idle, .stopped: return nil
        case .waiting(let until): return until
        case .locating(let deadline), .connecting(let deadline), .settingUp(let deadline, _): return deadline
        case .ready:
            // Deadlines grow with submission: the oldest call's is the first, unless one was sent again; queued
            // requests are younger than every call.
            var earliest: Instant?
            for index in inFlightHead..<inFlight.count where !inFlight[index].members.isEmpty {
                let deadline = inFlight[index].deadline
                earliest = earliest.map { min($0, deadline) } ?? deadline
                if retriedInFlight == 0 { break }
            }
            if let first = queued.first {
                let deadline = first.submitted + configuration.timeout
                earliest = earliest.map { min($0, deadline) } ?? deadline
            }
            return earliest
        }
    }

    // MARK: Inputs of the shell

    /// The first attempt (nothing once started).
    mutating func begin(now: Instant) -> Step {
        guard start(now: now) else { return Step() }
        return attempt(now: now)
    }

    /// The timer fired: the sentinel's deadline (a node's timeout, a watch to make again), or the connection's (the
    /// next attempt, the connect timeout, a request's).
    mutating func timer(now: Instant) -> Step {
        if let action = sentinel?.timerFired(now: now), action != .none { return news(action, now: now) }
        switch timerFired(now: now) {
        case .none: return Step()
        case .connect: return attempt(now: now)
        case .lost(let loss): return Step(loss: loss)
        }
    }

    /// The stream to the server failed or closed, or could not be made.
    mutating func streamFailed(_ error: RedisClientError, now: Instant) -> Step {
        Step(loss: failed(error, now: now))
    }

    /// Leave the server (another pipeline found it no longer the primary), if connected to it.
    mutating func leave(_ error: RedisClientError, now: Instant) -> Step {
        guard isReady else { return Step() }
        return Step(loss: lose(error, now: now))
    }

    /// The connection to the sentinel is up.
    mutating func sentinelConnected(now: Instant) -> Step {
        news(sentinel?.connected(now: now) ?? .none, now: now)
    }

    /// One whole reply from the sentinel.
    mutating func sentinelReceived(_ reply: RedisReply, now: Instant) -> Step {
        news(sentinel?.received(reply, now: now) ?? .none, now: now)
    }

    /// The connection to the sentinel failed or closed (`reason` without a secret).
    mutating func sentinelFailed(_ reason: String, now: Instant) -> Step {
        news(sentinel?.failed(reason, now: now) ?? .none, now: now)
    }

    /// What to write to the sentinel when a step says `.write`.
    var sentinelOutput: [UInt8] { sentinel?.output ?? [] }

    /// ``sentinelOutput`` has been written.
    mutating func sentinelFlushed() {
        sentinel?.flushed()
    }

    // MARK: Inputs of the connection

    /// The first attempt: true when the shell should connect now.
    mutating func start(now: Instant) -> Bool {
        guard case .idle = state else { return false }
        state = .connecting(deadline: now + configuration.connectTimeout)
        return true
    }

    /// The stream is connected (TLS handshaken): the set-up commands are in the output, to be written.
    mutating func connected(now: Instant) {
        guard case .connecting(let deadline) = state else { return }
        state = .settingUp(deadline: deadline, step: 0)
        output.removeAll(keepingCapacity: true)
        for command in configuration.setUp { output.append(contentsOf: command.bytes) }
    }

    /// The stream failed or closed, or could not be made.
    mutating func failed(_ error: RedisClientError, now: Instant) -> Loss? {
        switch state {
        case .idle, .stopped, .waiting: return nil
        case .locating, .connecting, .settingUp, .ready: return lose(error, now: now)
        }
    }

    /// One request, queued for the next write (``flush(format:write:)``). `hopped`: it came from another thread while
    /// connected, and its caller was told it was taken: refused now, it is answered ``RedisClientError/unavailable``.
    mutating func submit(_ request: Request, now: Instant, hopped: Bool = false) -> SubmitResult {
        guard case .ready = state else {
            return hopped ? .answer(RedisClientError(.unavailable, "not connected")) : .refused
        }
        // Near server and replies due soon: wait for them and leave together with whatever queues meanwhile.
        let waits = inFlightRequests > 0 && (roundTrip ?? .max) <= configuration.batchingRoundTrip
        queued.append(Member(request: request, submitted: now))
        return waits ? .deferred : .flush
    }

    /// One whole reply, as the reader parsed it.
    mutating func received(_ reply: RedisPipelineReply, now: Instant) -> ReplyResult {
        switch state {
        case .idle, .waiting, .locating, .connecting, .stopped:
            return .none
        case .settingUp(let deadline, let step):
            return setUpReply(reply, step: step, deadline: deadline, now: now)
        case .ready:
            break
        }
        guard inFlightHead < inFlight.count else {
            return .lost(lose(RedisClientError(.protocolError, "a reply that no request asked for"), now: now))
        }
        let entry = inFlight[inFlightHead]
        guard !entry.members.isEmpty else {
            popHead()
            if case .other(.bulk(let digest?)) = reply, lowercased(digest) == configuration.scriptDigest {
                return .none
            }
            return .lost(
                lose(RedisClientError(.protocolError, "SCRIPT LOAD did not answer the script's SHA-1"), now: now))
        }
        switch reply {
        case .tagged(let tag, let answers) where tag == entry.tag:
            guard answers.count == entry.members.count else {
                return .lost(lose(RedisClientError(.protocolError, "a reply with another number of answers"), now: now))
            }
            popHead()
            var event: RedisPipelineEvent?
            unproven = false
            failures = 0
            if reported != .up {
                reported = .up
                event = .connected
            }
            var results: [Answer] = []
            results.reserveCapacity(answers.count)
            for (member, answer) in zip(entry.members, answers) {
                let latency = now - member.submitted
                shortestInRead = min(shortestInRead ?? .max, latency)
                results.append(Answer(request: member.request, result: .success(answer), latency: latency))
            }
            return .answers(results, event: event)
        case .other(.error(let message)) where Self.notPrimary(Self.errorName(message)) != nil:
            // A demoted primary (it keeps its clients), a server loading its data, a replica that lost its primary:
            // its counts would not be shared, so it is left like a lost one.
            return .lost(lose(Self.notPrimary(Self.errorName(message))!, now: now))
        case .other(.error(let message)) where message.hasPrefix("NOSCRIPT") && !entry.retried:
            // The server lost its scripts (a restart without our reconnecting, SCRIPT FLUSH, a failover): load it
            // again and send this call once more, both at the back of the line, in one write.
            popHead()
            var again = entry
            again.retried = true
            inFlight.append(InFlight(members: [], tag: 0, command: [], deadline: entry.deadline, retried: true))
            inFlight.append(again)
            inFlightRequests += again.members.count
            retriedInFlight += 1
            output.append(contentsOf: configuration.scriptLoad)
            output.append(contentsOf: entry.command)
            return .reloading
        case .other(.error(let message)):
            popHead()
            let error = RedisClientError(.script, "the script failed (\(RedisPipelineMachine.errorName(message)))")
            var event: RedisPipelineEvent?
            if reported == .up {
                reported = .failing
                event = .failing(error)
            }
            return .answers(
                entry.members.map {
                    Answer(request: $0.request, result: .failure(error), latency: now - $0.submitted)
                }, event: event)
        case .other(.array(let parts?)) where parts.first == .bulk(RedisTag.bytes(entry.tag)):
            // Its own tag, but not answers of integers with it.
            return .lost(lose(RedisClientError(.protocolError, "an unexpected reply type"), now: now))
        default:
            // A reply of another shape, or another request's tag: nothing after it can be trusted.
            return .lost(lose(RedisClientError(.protocolError, "a reply for another request"), now: now))
        }
    }

    /// Every reply of one read has been given: the round trip is updated, and the requests that waited for these
    /// replies should be written (``flush(format:write:)``).
    mutating func endOfRead() {
        guard let shortest = shortestInRead else { return }
        shortestInRead = nil
        // The read's shortest wait: the round trip with the least queueing in it (under load the later replies of
        // a read also waited for the ones before them).
        roundTrip = roundTrip.map { ($0 * 7 + shortest) / 8 } ?? shortest
    }

    mutating func timerFired(now: Instant) -> TimerResult {
        switch state {
        case .idle, .stopped:
            return .none
        case .waiting(let until):
            guard now >= until else { return .none }
            state = .connecting(deadline: now + configuration.connectTimeout)
            return .connect
        case .locating(let deadline), .connecting(let deadline), .settingUp(let deadline, _):
            guard now >= deadline else { return .none }
            return .lost(lose(RedisClientError(.timeout, "no connection set up within the connect timeout"), now: now))
        case .ready:
            guard let deadline = nextDeadline, now >= deadline else { return .none }
            return .lost(
                lose(
                    RedisClientError(.timeout, "no reply within \(configuration.timeout / 1_000_000) ms"), now: now))
        }
    }

    /// Stops for good: the requests in flight are returned, to be answered `.unavailable`.
    mutating func stop() -> [Request] {
        state = .stopped
        output.removeAll()
        return drain()
    }

    /// Puts the queued requests into calls, oldest first, and hands the pending output to `write`, emptying it.
    ///
    /// `format` is given the queued requests from the oldest on (at most ``Configuration/maximumBatch``) and a
    /// call's tag; it returns the call's command for as many of them as it joins (at least one: a request that
    /// joins no other is a call alone).
    mutating func flush(
        format: (_ requests: ArraySlice<Request>, _ tag: UInt64) -> (command: [UInt8], taken: Int),
        write: (UnsafeRawBufferPointer) -> Void
    ) {
        if !queued.isEmpty, case .ready = state {
            var start = 0
            while start < queued.count {
                let end = min(queued.count, start + max(1, configuration.maximumBatch))
                let tag = nextTag
                nextTag &+= 1
                let (command, taken) = format(ArraySlice(queued[start..<end].lazy.map(\.request)), tag)
                let count = min(max(1, taken), end - start)
                let members = Array(queued[start..<start + count])
                inFlight.append(
                    InFlight(
                        members: members, tag: tag, command: command,
                        deadline: members[0].submitted + configuration.timeout, retried: false))
                inFlightRequests += count
                output.append(contentsOf: command)
                start += count
            }
            queued.removeAll(keepingCapacity: queued.capacity <= 4_096)
        }
        guard !output.isEmpty else { return }
        output.withUnsafeBytes(write)
        output.removeAll(keepingCapacity: output.capacity <= 65_536)
    }

    // MARK: Helpers

    /// An attempt starts (the connect timeout runs): to the configured server, or, with a sentinel, once it names
    /// the primary.
    private mutating func attempt(now: Instant) -> Step {
        guard case .connecting(let deadline) = state, let action = sentinel?.locate(now: now) else {
            server = configuration.server
            return Step(connect: configuration.server)
        }
        state = .locating(deadline: deadline)
        return news(action, now: now)
    }

    /// What the sentinel said, for the connection: connect where it names the primary (if still waiting for it),
    /// leave a server it moved away from, fail the attempt when no sentinel answered.
    private mutating func news(_ action: SentinelMachine.Action, now: Instant) -> Step {
        var step = Step(sentinel: action.stream)
        switch action.news {
        case .none:
            break
        case .primary(let node):
            guard case .locating(let deadline) = state else { break }
            state = .connecting(deadline: deadline)
            server = node
            step.connect = node
        case .moved(let node):
            switch state {
            case .connecting, .settingUp, .ready:
                step.loss = lose(
                    RedisClientError(.notPrimary, "the sentinels moved the primary to \(node.description)"), now: now)
            case .idle, .waiting, .locating, .stopped:
                break
            }
        case .exhausted(let error):
            step.loss = failed(error, now: now)
        }
        return step
    }

    private mutating func setUpReply(
        _ reply: RedisPipelineReply, step: Int, deadline: Instant, now: Instant
    ) -> ReplyResult {
        let command = configuration.setUp[step]
        if case .other(.error(let message)) = reply {
            let name = RedisPipelineMachine.errorName(message)
            if let error = Self.notPrimary(name) { return .lost(lose(error, now: now)) }
            if name == "WRONGPASS" {
                return .lost(lose(RedisClientError(.auth, "the password or user name is wrong (\(name))"), now: now))
            }
            if name == "NOAUTH" {
                return .lost(
                    lose(
                        RedisClientError(.auth, "the server requires a password and none was given (\(name))"), now: now
                    )
                )
            }
            if command.kind == .auth {
                return .lost(lose(RedisClientError(.auth, "the server refused AUTH (\(name))"), now: now))
            }
            if command.kind != .role {
                let what = command.kind == .select ? "SELECT" : "SCRIPT LOAD"
                return .lost(lose(RedisClientError(.script, "\(what) was refused (\(name))"), now: now))
            }
            // ROLE refused (an ACL without it, a managed service that renames it): the role cannot be known here, and
            // a replica is still caught by the READONLY of its first call.
        } else {
            switch command.kind {
            case .scriptLoad:
                guard case .other(.bulk(let digest?)) = reply, lowercased(digest) == configuration.scriptDigest else {
                    return .lost(
                        lose(
                            RedisClientError(.protocolError, "SCRIPT LOAD did not answer the script's SHA-1"), now: now)
                    )
                }
            case .role:
                guard case .other(.array(let parts?)) = reply, case .bulk(let role?)? = parts.first else {
                    return .lost(lose(RedisClientError(.protocolError, "an unexpected reply to ROLE"), now: now))
                }
                guard role == Array("master".utf8) else {
                    let name = String(decoding: role.prefix(16), as: UTF8.self).filter { $0.isLetter }
                    return .lost(
                        lose(RedisClientError(.notPrimary, "the server is a \(name), not the primary (ROLE)"), now: now)
                    )
                }
                unproven = false
            case .auth, .select:
                guard case .other(.status("OK")) = reply else {
                    let what = command.kind == .auth ? "AUTH" : "SELECT"
                    return .lost(lose(RedisClientError(.protocolError, "an unexpected reply to \(what)"), now: now))
                }
            }
        }
        guard step + 1 == configuration.setUp.count else {
            state = .settingUp(deadline: deadline, step: step + 1)
            return .none
        }
        state = .ready
        guard !unproven else { return .ready(nil) }
        failures = 0
        guard reported != .up else { return .ready(nil) }
        reported = .up
        return .ready(.connected)
    }

    private mutating func lose(_ error: RedisClientError, now: Instant) -> Loss {
        output.removeAll(keepingCapacity: true)
        let failed = drain()
        failures += 1
        if error.code == .notPrimary { unproven = true }
        let base = UInt64(min(5_000, 50 << min(failures - 1, 7)))
        let delay = (base + random.next() % (base / 5 + 1)) * 1_000_000
        state = .waiting(until: now + delay)
        var event: RedisPipelineEvent?
        if reported != .down {
            reported = .down
            event = .lost(error)
        }
        var loss = Loss(error: error, failed: failed, event: event, retryAt: now + delay, server: server)
        if sentinel != nil {
            // The next attempt asks the sentinels again: no server is ours until one answers, and the answer is news
            // even if it is the same.
            server = nil
            sentinel?.primaryLost()
            loss.closeSentinel = sentinel?.cancel().stream == .close
        }
        return loss
    }

    private mutating func drain() -> [Request] {
        let requests = inFlight[inFlightHead...].flatMap { $0.members.map(\.request) } + queued.map(\.request)
        inFlight.removeAll(keepingCapacity: inFlight.capacity <= 4_096)
        queued.removeAll(keepingCapacity: queued.capacity <= 4_096)
        inFlightHead = 0
        inFlightRequests = 0
        retriedInFlight = 0
        roundTrip = nil
        shortestInRead = nil
        return requests
    }

    private mutating func popHead() {
        if inFlight[inFlightHead].retried && !inFlight[inFlightHead].members.isEmpty { retriedInFlight -= 1 }
        inFlightRequests -= inFlight[inFlightHead].members.count
        inFlight[inFlightHead].members = []
        inFlight[inFlightHead].command = []
        inFlightHead += 1
        if inFlightHead == inFlight.count {
            inFlight.removeAll(keepingCapacity: inFlight.capacity <= 4_096)
            inFlightHead = 0
        } else if inFlightHead >= 1_024 && inFlightHead * 2 >= inFlight.count {
            inFlight.removeFirst(inFlightHead)
            inFlightHead = 0
        }
    }

    private func lowercased(_ bytes: [UInt8]) -> [UInt8] {
        bytes.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
    }

    /// The error of a server that cannot count, from an error reply's first word; nil for any other.
    static func notPrimary(_ name: String) -> RedisClientError? {
        switch name {
        case "READONLY": RedisClientError(.notPrimary, "the server is read-only, a replica now (READONLY)")
        case "LOADING": RedisClientError(.notPrimary, "the server is loading its data (LOADING)")
        case "MASTERDOWN": RedisClientError(.notPrimary, "the server has lost its primary (MASTERDOWN)")
        default: nil
        }
    }

    /// The first word of an error reply (`WRONGPASS`, `NOSCRIPT`, `ERR`): its code, never the rest, which may
    /// quote a command's arguments.
    static func errorName(_ message: String) -> String {
        String(
            message.prefix { $0 != " " }.prefix(32).filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
    }
}

/// What a pipeline reports: each loss once, and each return (or first connection) once.
public enum RedisPipelineEvent: Sendable, Equatable {
    /// Connected, authenticated, script loaded: requests are sent from now on (also: calls are answered again
    /// after ``failing(_:)``).
    case connected
    /// Connected, but the server answers calls with errors: no decision is made in it until a call is answered.
    case failing(RedisClientError)
    /// The connection was lost or could not be made (reported once per loss, not per attempt).
    case lost(RedisClientError)
}

/// What the script answers for one request: one integer, or two.
public struct RedisScriptAnswer: Sendable, Equatable {
    public var first: Int64
    public var second: Int64?

    public init(_ first: Int64, _ second: Int64? = nil) {
        self.first = first
        self.second = second
    }
}

/// One whole reply, sorted for matching: the script's usual answer `{tag, {integer[, integer]}, ...}` (one answer
/// per request of the call), or anything else.
enum RedisPipelineReply: Equatable {
    case tagged(tag: UInt64, answers: [RedisScriptAnswer])
    case other(RedisReply)
}

/// SplitMix64: the reconnection jitter, seeded (a test replays it).
struct JitterGenerator: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension RedisPipelineMachine.Configuration {
    /// The machine's configuration for a client's: which set-up commands are sent (`AUTH` with a password, with the
    /// user name when there is one; `ROLE`; `SELECT` for a database other than 0; `SCRIPT LOAD` last), the timeouts
    /// (at least a millisecond), and with Sentinel its commands (`AUTH` with a sentinel password) and a node's
    /// timeout: a round of every node fits in the connect timeout, with time left to connect to the primary.
    /// `format` formats one command's arguments (the shell's formatter: the machine makes no C call).
    init(_ client: RedisClientConfiguration, digest: [UInt8], format: ([[UInt8]]) -> [UInt8]) {
        func command(_ words: String...) -> [UInt8] { format(words.map { Array($0.utf8) }) }
        var setUp: [RedisPipelineMachine.SetUpCommand] = []
        if let password = client.password {
            let user = client.username.map { [$0] } ?? []
            setUp.append(.init(kind: .auth, bytes: format((["AUTH"] + user + [password]).map { Array($0.utf8) })))
        }
        setUp.append(.init(kind: .role, bytes: command("ROLE")))
        if client.database != 0 {
            setUp.append(.init(kind: .select, bytes: command("SELECT", String(client.database))))
        }
        let scriptLoad = command("SCRIPT", "LOAD", client.script)
        setUp.append(.init(kind: .scriptLoad, bytes: scriptLoad))
        let connectTimeout = max(1_000_000, client.connectTimeout.nanoseconds)
        self.init(
            timeout: max(1_000_000, client.timeout.nanoseconds), connectTimeout: connectTimeout,
            setUp: setUp, scriptLoad: scriptLoad, scriptDigest: digest)
        server = SentinelMachine.Node(host: client.host, port: client.port)
        sentinel = client.sentinel.map { sentinel in
            SentinelMachine.Configuration(
                master: sentinel.master,
                nodes: sentinel.nodes.map { SentinelMachine.Node(host: $0.host, port: $0.port) },
                auth: sentinel.password.map { command("AUTH", $0) },
                ask: command("SENTINEL", "get-master-addr-by-name", sentinel.master),
                subscribe: command("SUBSCRIBE", "+switch-master"),
                nodeTimeout: connectTimeout / UInt64(sentinel.nodes.count + 1))
        }
    }
}
