import MonotonicTime

/// Where the primary is, asked of Redis Sentinel, without I/O, C or a clock of its own: the shell
/// (``SentinelLocator``) connects where it is told, writes ``output`` when told, feeds the replies and the timer, and
/// carries out the actions.
///
/// - Asking: the nodes are asked in turn `SENTINEL get-master-addr-by-name`, starting with the last that answered;
///   a node that cannot be reached, refuses, does not answer within ``Configuration/nodeTimeout`` or does not know the
///   master is passed over. When every node of a round has been passed over, the round has failed (the pipeline's
///   reconnection delay decides when to ask again).
/// - Watching: the node that answered keeps the connection, subscribed to `+switch-master`; an announcement for this
///   master of another address than the one in use means the primary has moved. A watch that ends is made again by
///   asking once more after ``Configuration/watchRetry``, which also notices a move missed meanwhile.
struct SentinelMachine {
    struct Node: Equatable, Sendable {
        var host: String
        var port: UInt16

        /// `host:port`, `[ipv6]:port`.
        var description: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }
    }

    struct Configuration {
        var master: String
        var nodes: [Node]
        /// `AUTH` for the sentinels, formatted; nil: none.
        var auth: [UInt8]?
        /// `SENTINEL get-master-addr-by-name <master>`, formatted.
        var ask: [UInt8]
        /// `SUBSCRIBE +switch-master`, formatted.
        var subscribe: [UInt8]
        /// How long one node may take to be reached and to answer (nanoseconds).
        var nodeTimeout: UInt64
        /// How long after a watch ended it is made again (nanoseconds).
        var watchRetry: UInt64 = 1_000_000_000
    }

    /// What the shell does with its connection to a sentinel, and what the pipeline learns (composed into
    /// ``RedisPipelineMachine``, which acts on the news).
    struct Action: Equatable {
        enum Stream: Equatable {
            case none
            /// Close any connection to a sentinel, and connect to this one.
            case connect(Node)
            /// Write ``SentinelMachine/output`` (then ``SentinelMachine/flushed()``).
            case write
            /// Close the connection to the sentinel.
            case close
        }

        enum News: Equatable {
            case none
            /// The primary, for a pipeline that waits for it: connect there.
            case primary(Node)
            /// The primary is no longer where the pipeline is (a `+switch-master`, or another answer when asked
            /// again): leave it.
            case moved(Node)
            /// No node named the primary in this round (`error` says why, without a secret).
            case exhausted(RedisClientError)
        }

        var stream: Stream
        var news: News

        static let none = Action(stream: .none, news: .none)
        static let write = Action(stream: .write, news: .none)
        static let close = Action(stream: .close, news: .none)
        static func connect(_ node: Node) -> Action { Action(stream: .connect(node), news: .none) }
    }

    private enum State: Equatable {
        case idle
        /// Asking `node` (its index); `tried` nodes of this round so far; `authed`: AUTH has been answered.
        case asking(node: Int, tried: Int, deadline: Instant, authenticated: Bool)
        /// Subscribed on `node`.
        case watching(node: Int)
        /// The watch ended; asked again at `until`.
        case resting(until: Instant)
    }

    let configuration: Configuration
    private var state = State.idle
    /// The node to ask first: the last that answered.
    private var preferred = 0
    /// The pipeline waits for the primary's address (``Action/News/primary(_:)``, not ``Action/News/moved(_:)``).
    private var pipelineWaits = false
    /// The address the pipeline was given last.
    private(set) var current: Node?
    /// Bytes to write to the sentinel.
    private(set) var output: [UInt8] = []
    /// Why the last node of the round was passed over (for ``Action/News/exhausted(_:)``).
    private var lastProblem = "no node"

    init(configuration: Configuration) {
        precondition(!configuration.nodes.isEmpty, "at least one sentinel")
        self.configuration = configuration
    }

    /// The earliest time at which ``timerFired(now:)`` has something to do.
    var nextDeadline: Instant? {
        switch state {
        case .idle, .watching: nil
        case .asking(_, _, let deadline, _): deadline
        case .resting(let until): until
        }
    }

    /// The pipeline needs the primary: a round of asking starts (or the one under way goes on, now for it).
    mutating func locate(now: Instant) -> Action {
        pipelineWaits = true
        if case .asking = state { return .none }
        return ask(node: preferred, tried: 1, now: now)
    }

    /// The pipeline stopped waiting (its connect timeout passed): a round under way ends quietly.
    mutating func cancel() -> Action {
        pipelineWaits = false
        guard case .asking = state else { return .none }
        state = .idle
        return .close
    }

    /// The connection to the node being asked is up: what to write is in ``output``.
    mutating func connected(now: Instant) -> Action {
        guard case .asking(let node, let tried, let deadline, _) = state else { return .none }
        output.removeAll(keepingCapacity: true)
        if let auth = configuration.auth { output.append(contentsOf: auth) }
        output.append(contentsOf: configuration.ask)
        state = .asking(node: node, tried: tried, deadline: deadline, authenticated: configuration.auth == nil)
        return .write
    }

    /// The connection to the sentinel failed or closed (`reason` without a secret).
    mutating func failed(_ reason: String, now: Instant) -> Action {
        switch state {
        case .idle, .resting: return .none
        case .asking(let node, let tried, _, _):
            return next(after: node, tried: tried, problem: reason, now: now)
        case .watching:
            state = .resting(until: now + configuration.watchRetry)
            return .none
        }
    }

    mutating func timerFired(now: Instant) -> Action {
        switch state {
        case .idle, .watching: return .none
        case .asking(let node, let tried, let deadline, _):
            guard now >= deadline else { return .none }
            return next(after: node, tried: tried, problem: "no answer in time", now: now)
        case .resting(let until):
            guard now >= until else { return .none }
            return ask(node: preferred, tried: 1, now: now)
        }
    }

    /// One whole reply from the sentinel.
    mutating func received(_ reply: RedisReply, now: Instant) -> Action {
        switch state {
        case .idle, .resting: return .none
        case .asking(let node, let tried, let deadline, let authenticated):
            if !authenticated {
                if case .error(let message) = reply {
                    let name = RedisPipelineMachine<Never>.errorName(message)
                    return next(after: node, tried: tried, problem: "the sentinel refused AUTH (\(name))", now: now)
                }
                state = .asking(node: node, tried: tried, deadline: deadline, authenticated: true)
                return .none
            }
            switch reply {
            case .array(let parts?) where parts.count == 2:
                guard case .bulk(let host?) = parts[0], case .bulk(let port?) = parts[1],
                    let number = UInt16(String(decoding: port, as: UTF8.self)), number > 0, !host.isEmpty,
                    host.count <= 255
                else {
                    return next(after: node, tried: tried, problem: "an unexpected answer", now: now)
                }
                let primary = Node(host: String(decoding: host, as: UTF8.self), port: number)
                preferred = node
                state = .watching(node: node)
                output.removeAll(keepingCapacity: true)
                output.append(contentsOf: configuration.subscribe)
                // The connection stays, subscribed to `+switch-master`.
                return Action(stream: .write, news: answer(primary))
            case .array(nil), .bulk(nil):
                return next(after: node, tried: tried, problem: "it does not know the master", now: now)
            case .error(let message):
                let name = RedisPipelineMachine<Never>.errorName(message)
                return next(after: node, tried: tried, problem: "it refused (\(name))", now: now)
            default:
                return next(after: node, tried: tried, problem: "an unexpected answer", now: now)
            }
        case .watching:
            // `message`, `+switch-master`, `<master> <old ip> <old port> <new ip> <new port>`.
            guard case .array(let parts?) = reply, parts.count == 3, parts[0] == .bulk(Array("message".utf8)),
                parts[1] == .bulk(Array("+switch-master".utf8)), case .bulk(let text?) = parts[2]
            else { return .none }
            let words = String(decoding: text, as: UTF8.self).split(separator: " ")
            guard words.count == 5, words[0] == configuration.master, let port = UInt16(words[4]), port > 0 else {
                return .none
            }
            return Action(stream: .none, news: answer(Node(host: String(words[3]), port: port)))
        }
    }

    /// The pipeline lost the primary it was given, or left it: the next answer is news even if it is the same.
    mutating func primaryLost() {
        current = nil
    }

    /// ``output`` has been written.
    mutating func flushed() {
        output.removeAll(keepingCapacity: true)
    }

    // MARK: Helpers

    private mutating func ask(node: Int, tried: Int, now: Instant) -> Action {
        state = .asking(node: node, tried: tried, deadline: now + configuration.nodeTimeout, authenticated: false)
        output.removeAll(keepingCapacity: true)
        return .connect(configuration.nodes[node])
    }

    private mutating func next(after node: Int, tried: Int, problem: String, now: Instant) -> Action {
        lastProblem = "\(configuration.nodes[node].description): \(problem)"
        guard tried < configuration.nodes.count else {
            output.removeAll(keepingCapacity: true)
            guard pipelineWaits else {
                // Asked again for the watch: try again later, quietly (the pipeline still has its primary).
                state = .resting(until: now + configuration.watchRetry)
                return .close
            }
            pipelineWaits = false
            state = .idle
            let count = configuration.nodes.count
            let error = RedisClientError(
                .refused,
                "no sentinel named the primary of \(configuration.master) (\(count) asked; last, \(lastProblem))")
            return Action(stream: .close, news: .exhausted(error))
        }
        return ask(node: (node + 1) % configuration.nodes.count, tried: tried + 1, now: now)
    }

    /// An address named by a sentinel: given to a pipeline that waits, or news of a move when it differs.
    private mutating func answer(_ primary: Node) -> Action.News {
        if pipelineWaits {
            pipelineWaits = false
            current = primary
            return .primary(primary)
        }
        guard let current, current != primary else { return .none }
        self.current = primary
        return .moved(primary)
    }
}
