import MonotonicTime
import Testing

@testable import RedisClient

/// The pipeline's machine with its ``SentinelMachine`` composed in, without sockets and with a test clock: which
/// set-up commands a client's configuration sends, where each attempt connects, what every answer of the sentinels
/// does to the connection, and what a request from another thread gets.
@Suite struct RedisPipelineSentinelTests {
    typealias Machine = RedisPipelineMachine<Int>
    typealias Node = SentinelMachine.Node

    static let ms: UInt64 = 1_000_000
    /// The test clock's origin.
    static let t0: Instant = 0
    static let digest = Array("0123456789abcdef0123456789abcdef01234567".utf8)
    static let sentinels = [Node(host: "10.0.0.1", port: 26379), Node(host: "10.0.0.2", port: 26379)]
    static let primary = Node(host: "10.0.1.1", port: 6379)

    /// Commands as words with `;` after each: what the shell's formatter would format.
    static func format(_ arguments: [[UInt8]]) -> [UInt8] {
        Array((arguments.map { String(decoding: $0, as: UTF8.self) }.joined(separator: " ") + ";").utf8)
    }

    static func client(
        password: String? = "pw", username: String? = nil, database: Int = 0, sentinel: Bool = true,
        sentinelPassword: String? = nil
    ) -> RedisClientConfiguration {
        var client = RedisClientConfiguration(host: "redis.internal", port: 6380, script: "return 1")
        client.password = password
        client.username = username
        client.database = database
        client.timeout = .milliseconds(100)
        client.connectTimeout = .milliseconds(3_000)
        if sentinel {
            var configuration = RedisClientConfiguration.Sentinel(
                master: "duo-limits", nodes: sentinels.map { (host: $0.host, port: $0.port) })
            configuration.password = sentinelPassword
            client.sentinel = configuration
        }
        return client
    }

    static func machine(_ client: RedisClientConfiguration = client()) -> Machine {
        Machine(configuration: .init(client, digest: digest, format: format), seed: 7)
    }

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    /// The set-up of `machine` written and answered (AUTH, ROLE, SCRIPT LOAD) at `now`; the last reply's result.
    static func setUp(_ machine: inout Machine, at now: Instant) -> Machine.ReplyResult {
        machine.connected(now: now)
        machine.flush(format: { _, _ in ([], 1) }, write: { _ in })
        _ = machine.received(.other(.status("OK")), now: now)
        _ = machine.received(.other(.array([.bulk(Array("master".utf8))])), now: now)
        return machine.received(.other(.bulk(digest)), now: now)
    }

    static func address(_ node: Node) -> RedisReply {
        .array([.bulk(Array(node.host.utf8)), .bulk(Array(String(node.port).utf8))])
    }

    static func switchMaster(to node: Node) -> RedisReply {
        .array([
            .bulk(Array("message".utf8)), .bulk(Array("+switch-master".utf8)),
            .bulk(Array("duo-limits 10.0.1.1 6379 \(node.host) \(node.port)".utf8)),
        ])
    }

    /// A machine connected to ``primary`` through the first sentinel, set up at `now`, the sentinel watching.
    static func ready(at now: Instant = 0) -> Machine {
        var machine = machine()
        _ = machine.begin(now: now)
        _ = machine.sentinelConnected(now: now)
        machine.sentinelFlushed()
        _ = machine.sentinelReceived(address(primary), now: now)
        machine.sentinelFlushed()
        _ = setUp(&machine, at: now)
        return machine
    }

    // MARK: The set-up commands

    @Test func aPasswordSendsAuthWithItsUserNameThenRoleAndTheScriptLast() {
        let commands = Machine.Configuration(
            Self.client(username: "relay", sentinel: false), digest: Self.digest, format: Self.format)
        #expect(commands.setUp.map(\.kind) == [.auth, .role, .scriptLoad])
        #expect(commands.setUp.map { Self.text($0.bytes) } == ["AUTH relay pw;", "ROLE;", "SCRIPT LOAD return 1;"])
        #expect(Self.text(commands.scriptLoad) == "SCRIPT LOAD return 1;")
        #expect(commands.server == Node(host: "redis.internal", port: 6380))
        #expect(commands.sentinel == nil)
        #expect(commands.timeout == 100 * Self.ms)
        #expect(commands.connectTimeout == 3_000 * Self.ms)
    }

    @Test func noPasswordNoAuthAndADatabaseOtherThanZeroIsSelected() {
        let commands = Machine.Configuration(
            Self.client(password: nil, username: "ignored", database: 3, sentinel: false), digest: Self.digest,
            format: Self.format)
        #expect(commands.setUp.map { Self.text($0.bytes) } == ["ROLE;", "SELECT 3;", "SCRIPT LOAD return 1;"])
        #expect(commands.setUp.map(\.kind) == [.role, .select, .scriptLoad])
    }

    @Test func timeoutsAreAtLeastAMillisecond() {
        var client = Self.client(sentinel: false)
        client.timeout = .microseconds(10)
        client.connectTimeout = .zero
        let commands = Machine.Configuration(client, digest: Self.digest, format: Self.format)
        #expect(commands.timeout == Self.ms)
        #expect(commands.connectTimeout == Self.ms)
    }

    @Test func theSentinelsAreAskedForTheMasterAndARoundOfThemFitsTheConnectTimeout() throws {
        let commands = Machine.Configuration(
            Self.client(sentinelPassword: "sentinel-pw"), digest: Self.digest, format: Self.format)
        let sentinel = try #require(commands.sentinel)
        #expect(sentinel.master == "duo-limits")
        #expect(sentinel.nodes == Self.sentinels)
        #expect(sentinel.auth.map(Self.text) == "AUTH sentinel-pw;")
        #expect(Self.text(sentinel.ask) == "SENTINEL get-master-addr-by-name duo-limits;")
        #expect(Self.text(sentinel.subscribe) == "SUBSCRIBE +switch-master;")
        // Two nodes: a third of the connect timeout each, a third left to connect to the primary.
        #expect(sentinel.nodeTimeout == 1_000 * Self.ms)
        #expect(Machine.Configuration(Self.client(), digest: Self.digest, format: Self.format).sentinel?.auth == nil)
    }

    // MARK: Where an attempt connects

    @Test func withoutSentinelsEveryAttemptConnectsToTheConfiguredServer() {
        var machine = Self.machine(Self.client(sentinel: false))
        let first = machine.begin(now: Self.t0)
        #expect(first.connect == Node(host: "redis.internal", port: 6380))
        #expect(first.sentinel == .none && first.loss == nil)
        #expect(machine.begin(now: Self.t0).connect == nil, "started once")
        let loss = machine.streamFailed(RedisClientError(.refused, "cannot connect"), now: Self.t0 + Self.ms).loss
        #expect(loss?.server == Node(host: "redis.internal", port: 6380), "the event names the server")
        #expect(loss?.closeSentinel == false)
        #expect(machine.timer(now: loss!.retryAt).connect == Node(host: "redis.internal", port: 6380))
    }

    @Test func anAttemptAsksTheSentinelsFirstAndConnectsWhereTheyNameThePrimary() {
        var machine = Self.machine(Self.client(sentinelPassword: "sentinel-pw"))
        let first = machine.begin(now: Self.t0)
        #expect(first.sentinel == .connect(Self.sentinels[0]))
        #expect(first.connect == nil, "no server before a sentinel names it")
        #expect(machine.server == nil)
        // Connected to the sentinel: the machine says to write, and what.
        #expect(machine.sentinelConnected(now: Self.t0 + Self.ms).sentinel == .write)
        #expect(Self.text(machine.sentinelOutput) == "AUTH sentinel-pw;SENTINEL get-master-addr-by-name duo-limits;")
        machine.sentinelFlushed()
        #expect(machine.sentinelOutput.isEmpty)
        #expect(machine.sentinelReceived(.status("OK"), now: Self.t0 + 2 * Self.ms).sentinel == .none)
        let named = machine.sentinelReceived(Self.address(Self.primary), now: Self.t0 + 2 * Self.ms)
        #expect(named.connect == Self.primary)
        #expect(named.sentinel == .write, "the subscription to +switch-master goes on the same connection")
        #expect(Self.text(machine.sentinelOutput) == "SUBSCRIBE +switch-master;")
        #expect(machine.server == Self.primary)
        #expect(machine.isConnecting)
        guard case .ready(let event) = Self.setUp(&machine, at: Self.t0 + 3 * Self.ms) else {
            Issue.record("set up once ROLE says master")
            return
        }
        #expect(event == .connected)
    }

    @Test func theConnectTimeoutCoversTheAskingAndThePrimary() {
        var machine = Self.machine()
        _ = machine.begin(now: Self.t0)
        #expect(machine.nextDeadline == Self.t0 + 1_000 * Self.ms, "the first node's timeout comes first")
        _ = machine.sentinelConnected(now: Self.t0)
        _ = machine.sentinelReceived(Self.address(Self.primary), now: Self.t0 + 500 * Self.ms)
        // The primary never answers: the attempt fails at the connect timeout from its start, not from the answer.
        #expect(machine.nextDeadline == Self.t0 + 3_000 * Self.ms)
        #expect(machine.timer(now: Self.t0 + 2_999 * Self.ms).loss == nil)
        let loss = machine.timer(now: Self.t0 + 3_000 * Self.ms).loss
        #expect(loss?.error == RedisClientError(.timeout, ""))
        #expect(loss?.server == Self.primary)
        #expect(loss?.closeSentinel == false, "the sentinel's connection watches on")
        #expect(machine.server == nil, "the next attempt asks again")
    }

    @Test func aRoundInWhichNoSentinelNamesThePrimaryFailsTheAttemptAndTheNextAsksAgain() {
        var machine = Self.machine()
        _ = machine.begin(now: Self.t0)
        // The first cannot be reached: the second is asked.
        #expect(
            machine.sentinelFailed("cannot connect: refused", now: Self.t0 + Self.ms).sentinel
                == .connect(Self.sentinels[1]))
        _ = machine.sentinelConnected(now: Self.t0 + 2 * Self.ms)
        // It does not know the master: the round has failed, and with it the attempt.
        let step = machine.sentinelReceived(.array(nil), now: Self.t0 + 3 * Self.ms)
        #expect(step.sentinel == .close)
        #expect(step.connect == nil)
        let loss = step.loss
        #expect(loss?.error == RedisClientError(.refused, ""))
        #expect(loss?.error.reason.contains("no sentinel named the primary of duo-limits") == true)
        #expect(loss?.event == .lost(RedisClientError(.refused, "")))
        #expect(loss?.server == nil, "no server was reached")
        // The reconnection delay decides when to ask again: from the first node.
        let retryAt = loss?.retryAt ?? .init(nanoseconds: .max)
        #expect(machine.nextDeadline == retryAt)
        #expect(machine.timer(now: retryAt - 1).sentinel == .none)
        #expect(machine.timer(now: retryAt).sentinel == .connect(Self.sentinels[0]))
    }

    @Test func aNodeSilentPastItsTimeoutIsPassedOverWithinTheAttempt() {
        var machine = Self.machine()
        _ = machine.begin(now: Self.t0)
        _ = machine.sentinelConnected(now: Self.t0)
        #expect(machine.timer(now: Self.t0 + 999 * Self.ms).sentinel == .none)
        let next = machine.timer(now: Self.t0 + 1_000 * Self.ms)
        #expect(next.sentinel == .connect(Self.sentinels[1]))
        #expect(next.loss == nil)
        _ = machine.sentinelConnected(now: Self.t0 + 1_001 * Self.ms)
        #expect(
            machine.sentinelReceived(Self.address(Self.primary), now: Self.t0 + 1_002 * Self.ms).connect == Self.primary
        )
    }

    @Test func anAttemptWhoseConnectTimeoutEndsWhileAskingClosesTheSentinelsConnection() {
        var configuration = Machine.Configuration(Self.client(), digest: Self.digest, format: Self.format)
        // Nodes slower than the whole attempt (a configuration the shell never makes, but the machine allows).
        configuration.sentinel?.nodeTimeout = 10_000 * Self.ms
        var machine = Machine(configuration: configuration, seed: 7)
        _ = machine.begin(now: Self.t0)
        _ = machine.sentinelConnected(now: Self.t0)
        let loss = machine.timer(now: Self.t0 + 3_000 * Self.ms).loss
        #expect(loss?.error == RedisClientError(.timeout, ""))
        #expect(loss?.closeSentinel == true, "the round ends with the attempt")
        // A late answer of that round names nobody's primary.
        #expect(machine.sentinelReceived(Self.address(Self.primary), now: Self.t0 + 3_001 * Self.ms).connect == nil)
    }

    // MARK: While connected

    @Test func aSwitchAnnouncedByTheSentinelLeavesTheServerAndTheNextAttemptAsksAgain() {
        var machine = Self.ready()
        _ = machine.submit(1, now: Self.t0 + Self.ms)
        machine.flush(format: { _, tag in (Array("CALL-\(tag);".utf8), 1) }, write: { _ in })
        let moved = Node(host: "10.0.1.2", port: 6379)
        let step = machine.sentinelReceived(Self.switchMaster(to: moved), now: Self.t0 + 2 * Self.ms)
        #expect(step.sentinel == .none, "the watch stays")
        let loss = step.loss
        #expect(loss?.error == RedisClientError(.notPrimary, ""))
        #expect(loss?.error.reason == "the sentinels moved the primary to 10.0.1.2:6379")
        #expect(loss?.failed == [1], "the call in flight fails: its caller decides without the store")
        #expect(loss?.event == .lost(RedisClientError(.notPrimary, "")))
        #expect(loss?.server == Self.primary, "the event names the server left")
        #expect(!machine.isReady)
        // The next attempt asks the sentinels again (the first answered: it is asked first).
        let retry = machine.timer(now: loss?.retryAt ?? .init(nanoseconds: .max))
        #expect(retry.sentinel == .connect(Self.sentinels[0]))
        _ = machine.sentinelConnected(now: Self.t0 + 3_000 * Self.ms)
        #expect(machine.sentinelReceived(Self.address(moved), now: Self.t0 + 3_001 * Self.ms).connect == moved)
    }

    @Test func aSwitchToTheServerInUseOrForAnotherMasterChangesNothing() {
        var machine = Self.ready()
        #expect(machine.sentinelReceived(Self.switchMaster(to: Self.primary), now: Self.t0 + Self.ms).loss == nil)
        let other = RedisReply.array([
            .bulk(Array("message".utf8)), .bulk(Array("+switch-master".utf8)),
            .bulk(Array("other 10.0.1.1 6379 10.0.9.9 6379".utf8)),
        ])
        #expect(machine.sentinelReceived(other, now: Self.t0 + Self.ms).loss == nil)
        #expect(machine.isReady)
    }

    @Test func aWatchThatEndsIsMadeAgainWithoutTroublingTheConnectionUnlessThePrimaryMoved() {
        var machine = Self.ready()
        // The sentinel went away: the connection to Redis stays; asked again a second later.
        let ended = machine.sentinelFailed("the server closed the connection", now: Self.t0 + 10 * Self.ms)
        #expect(ended.loss == nil && ended.sentinel == .none && ended.connect == nil)
        #expect(machine.isReady)
        #expect(machine.nextDeadline == Self.t0 + 1_010 * Self.ms, "the watch's retry is the machine's deadline")
        #expect(machine.timer(now: Self.t0 + 1_010 * Self.ms).sentinel == .connect(Self.sentinels[0]))
        _ = machine.sentinelConnected(now: Self.t0 + 1_011 * Self.ms)
        machine.sentinelFlushed()
        // The same primary: nothing to do but watch.
        let same = machine.sentinelReceived(Self.address(Self.primary), now: Self.t0 + 1_012 * Self.ms)
        #expect(same.sentinel == .write && same.loss == nil && same.connect == nil)
        #expect(machine.isReady)
        // Asked once more later and told of another: the server is left.
        _ = machine.sentinelFailed("closed", now: Self.t0 + 2_000 * Self.ms)
        _ = machine.timer(now: Self.t0 + 3_000 * Self.ms)
        _ = machine.sentinelConnected(now: Self.t0 + 3_001 * Self.ms)
        let moved = machine.sentinelReceived(
            Self.address(Node(host: "10.0.1.3", port: 6379)), now: Self.t0 + 3_002 * Self.ms)
        #expect(moved.loss?.error == RedisClientError(.notPrimary, ""))
        #expect(moved.connect == nil, "the next attempt connects, after the reconnection delay")
    }

    @Test func aLossOfTheServerMakesTheNextAnswerNewsEvenIfItIsTheSame() {
        var machine = Self.ready()
        let loss = machine.streamFailed(
            RedisClientError(.closed, "the server closed the connection"), now: Self.t0 + Self.ms
        )
        .loss
        #expect(loss?.server == Self.primary)
        _ = machine.timer(now: loss?.retryAt ?? .init(nanoseconds: .max))
        _ = machine.sentinelConnected(now: Self.t0 + 1_000 * Self.ms)
        #expect(
            machine.sentinelReceived(Self.address(Self.primary), now: Self.t0 + 1_001 * Self.ms).connect == Self.primary
        )
    }

    @Test func leavingOnAnotherPipelinesWordHappensOnlyWhenConnected() {
        var machine = Self.ready()
        let left = machine.leave(RedisClientError(.closed, "another worker found the server not the primary"), now: 0)
        #expect(left.loss?.event == .lost(RedisClientError(.closed, "")))
        #expect(machine.leave(RedisClientError(.closed, ""), now: Self.t0 + Self.ms).loss == nil, "already gone")
    }

    // MARK: Requests from another thread

    @Test func aRequestFromAnotherThreadThatFindsTheConnectionGoneIsAnsweredUnavailable() {
        var machine = Self.machine()
        _ = machine.begin(now: Self.t0)
        #expect(machine.submit(1, now: Self.t0) == .refused, "on the loop: refused at once, the caller decides")
        #expect(
            machine.submit(2, now: Self.t0, hopped: true) == .answer(RedisClientError(.unavailable, "")),
            "hopped: its caller was told it was taken, so it is answered")
        var ready = Self.ready()
        #expect(ready.submit(3, now: Self.t0, hopped: true) == .flush)
        #expect(ready.inFlightCount == 1)
    }
}
