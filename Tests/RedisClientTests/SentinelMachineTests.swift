import MonotonicTime
import Testing

@testable import RedisClient

/// Asking Redis Sentinel where the primary is, without I/O and with a test clock: which node is asked next, what
/// each reply means, when to ask again, and `+switch-master`.
@Suite struct SentinelMachineTests {
    typealias Node = SentinelMachine.Node
    typealias Action = SentinelMachine.Action

    static let ms: UInt64 = 1_000_000
    /// The test clock's origin.
    static let t0: Instant = 0
    static let nodes = [
        Node(host: "10.0.0.1", port: 26379), Node(host: "10.0.0.2", port: 26379), Node(host: "::1", port: 26380),
    ]

    static func machine(password: Bool = false) -> SentinelMachine {
        SentinelMachine(
            configuration: .init(
                master: "duo-limits", nodes: nodes, auth: password ? Array("AUTH;".utf8) : nil,
                ask: Array("ASK;".utf8), subscribe: Array("SUBSCRIBE;".utf8), nodeTimeout: 300 * ms))
    }

    static func address(_ host: String, _ port: String) -> RedisReply {
        .array([.bulk(Array(host.utf8)), .bulk(Array(port.utf8))])
    }

    static func written(_ machine: inout SentinelMachine) -> String {
        defer { machine.flushed() }
        return String(decoding: machine.output, as: UTF8.self)
    }

    @Test func theFirstNodeIsAskedAndItsAnswerIsThePrimaryThenItsConnectionWatches() {
        var machine = Self.machine(password: true)
        #expect(machine.locate(now: 0) == .connect(Self.nodes[0]))
        #expect(machine.nextDeadline == Self.t0 + 300 * Self.ms, "the node's timeout runs from the attempt")
        #expect(machine.connected(now: Self.t0 + 1 * Self.ms) == .write)
        #expect(Self.written(&machine) == "AUTH;ASK;")
        #expect(machine.received(.status("OK"), now: Self.t0 + 2 * Self.ms) == .none)
        let primary = Node(host: "127.0.0.1", port: 6380)
        // The answer is the primary, and the subscription to write (the machine says so: `.write`).
        #expect(
            machine.received(Self.address("127.0.0.1", "6380"), now: Self.t0 + 2 * Self.ms)
                == Action(stream: .write, news: .primary(primary)))
        #expect(machine.current == primary)
        #expect(Self.written(&machine) == "SUBSCRIBE;", "the connection stays, subscribed to +switch-master")
        #expect(machine.nextDeadline == nil, "watching waits for nothing")
        // The subscription's confirmation is no news.
        let confirmation = RedisReply.array([
            .bulk(Array("subscribe".utf8)), .bulk(Array("+switch-master".utf8)), .integer(1),
        ])
        #expect(machine.received(confirmation, now: Self.t0 + 3 * Self.ms) == .none)
    }

    @Test func nodesThatFailAreSkippedInTurnAndAWholeRoundThatFailsSaysWhy() {
        var machine = Self.machine(password: true)
        #expect(machine.locate(now: 0) == .connect(Self.nodes[0]))
        // Unreachable: the next.
        #expect(machine.failed("cannot connect: refused", now: Self.t0 + 1 * Self.ms) == .connect(Self.nodes[1]))
        // A refused AUTH: the next.
        _ = machine.connected(now: Self.t0 + 2 * Self.ms)
        #expect(
            machine.received(.error("WRONGPASS invalid password"), now: Self.t0 + 3 * Self.ms)
                == .connect(Self.nodes[2]))
        // Silent past its timeout: the round is over, and the pipeline is told why (the last problem, no secret).
        _ = machine.connected(now: Self.t0 + 4 * Self.ms)
        #expect(machine.timerFired(now: Self.t0 + 3 * Self.ms + 299 * Self.ms) == .none)
        let exhausted = machine.timerFired(now: Self.t0 + 3 * Self.ms + 300 * Self.ms)
        #expect(exhausted.stream == .close, "the connection to the last node is closed")
        guard case .exhausted(let error) = exhausted.news else {
            Issue.record("a round of failed nodes is exhausted")
            return
        }
        #expect(error.code == .refused)
        #expect(error.reason.contains("no sentinel named the primary of duo-limits"))
        #expect(error.reason.contains("[::1]:26380: no answer in time"))
        #expect(!error.reason.contains("invalid password"))
        #expect(machine.nextDeadline == nil, "the pipeline's reconnection delay decides when to ask again")
        // Asked again: from the node that answered last (none has: the first).
        #expect(machine.locate(now: Self.t0 + 1_000 * Self.ms) == .connect(Self.nodes[0]))
    }

    @Test(arguments: [
        RedisReply.array(nil), .error("IDONTKNOW No such master with that name"), .integer(3),
        .array([.bulk(Array("10.0.0.9".utf8)), .bulk(Array("port".utf8))]),
    ])
    func aNodeThatCannotNameThePrimaryIsPassedOver(reply: RedisReply) {
        var machine = Self.machine()
        _ = machine.locate(now: 0)
        _ = machine.connected(now: 0)
        #expect(machine.received(reply, now: Self.t0 + 1 * Self.ms) == .connect(Self.nodes[1]))
    }

    @Test func theNodeThatAnsweredIsAskedFirstNextTime() {
        var machine = Self.machine()
        _ = machine.locate(now: 0)
        _ = machine.failed("refused", now: 0)
        _ = machine.connected(now: 0)
        #expect(
            machine.received(Self.address("10.0.1.1", "6379"), now: 0)
                == Action(stream: .write, news: .primary(Node(host: "10.0.1.1", port: 6379))))
        machine.primaryLost()
        #expect(machine.locate(now: Self.t0 + 5 * Self.ms) == .connect(Self.nodes[1]))
    }

    @Test func switchMasterForThisMasterMovesThePrimaryAndOthersAreIgnored() {
        var machine = Self.machine()
        _ = machine.locate(now: 0)
        _ = machine.connected(now: 0)
        _ = machine.received(Self.address("127.0.0.1", "6380"), now: 0)
        func message(_ text: String) -> RedisReply {
            .array([.bulk(Array("message".utf8)), .bulk(Array("+switch-master".utf8)), .bulk(Array(text.utf8))])
        }
        #expect(
            machine.received(message("other-master 127.0.0.1 7000 127.0.0.1 7001"), now: Self.t0 + 1 * Self.ms) == .none
        )
        #expect(
            machine.received(message("duo-limits 127.0.0.1 6380"), now: Self.t0 + 1 * Self.ms) == .none, "malformed")
        let moved = Node(host: "127.0.0.1", port: 6381)
        #expect(
            machine.received(message("duo-limits 127.0.0.1 6380 127.0.0.1 6381"), now: Self.t0 + 2 * Self.ms)
                == Action(stream: .none, news: .moved(moved)))
        #expect(machine.current == moved)
        // The same announcement again (another sentinel's echo) is no news.
        #expect(
            machine.received(message("duo-limits 127.0.0.1 6380 127.0.0.1 6381"), now: Self.t0 + 3 * Self.ms) == .none)
    }

    @Test func aWatchThatEndsIsMadeAgainAndNoticesAMoveMissedMeanwhile() {
        var machine = Self.machine()
        _ = machine.locate(now: 0)
        _ = machine.connected(now: 0)
        _ = machine.received(Self.address("127.0.0.1", "6380"), now: 0)
        // The sentinel went away: asked again after a second, quietly.
        #expect(machine.failed("the server closed the connection", now: Self.t0 + 10 * Self.ms) == .none)
        #expect(machine.nextDeadline == Self.t0 + 1_010 * Self.ms)
        #expect(machine.timerFired(now: Self.t0 + 1_009 * Self.ms) == .none)
        #expect(machine.timerFired(now: Self.t0 + 1_010 * Self.ms) == .connect(Self.nodes[0]))
        // No sentinel answers: tried again later, without troubling the pipeline, which still has its primary.
        #expect(machine.failed("refused", now: Self.t0 + 1_011 * Self.ms) == .connect(Self.nodes[1]))
        #expect(machine.failed("refused", now: Self.t0 + 1_012 * Self.ms) == .connect(Self.nodes[2]))
        #expect(machine.failed("refused", now: Self.t0 + 1_013 * Self.ms) == .close)
        #expect(machine.nextDeadline == Self.t0 + 2_013 * Self.ms)
        // Then one answers with another primary: the pipeline leaves its own.
        #expect(machine.timerFired(now: Self.t0 + 2_013 * Self.ms) == .connect(Self.nodes[0]))
        _ = machine.connected(now: Self.t0 + 2_014 * Self.ms)
        #expect(
            machine.received(Self.address("127.0.0.1", "6390"), now: Self.t0 + 2_015 * Self.ms)
                == Action(stream: .write, news: .moved(Node(host: "127.0.0.1", port: 6390))))
        #expect(Self.written(&machine) == "SUBSCRIBE;", "watching again")
    }

    @Test func aRoundTheConnectTimeoutEndedStopsAndTheNextStartsAfresh() {
        var machine = Self.machine()
        _ = machine.locate(now: 0)
        #expect(machine.cancel() == .close)
        #expect(machine.nextDeadline == nil)
        #expect(
            machine.connected(now: Self.t0 + 1 * Self.ms) == .none,
            "a late connection of the cancelled round is ignored")
        #expect(machine.locate(now: Self.t0 + 2 * Self.ms) == .connect(Self.nodes[0]))
    }
}
