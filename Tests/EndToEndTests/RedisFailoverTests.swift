import Foundation
import RedisTestSupport
import RelayTestSupport
import TCPForwarder
import Testing

/// Two relay processes whose Redis is replaced under them (docs/DESIGN.md, "Failover"), with real redis-server and
/// redis-sentinel processes on loopback: they follow the new primary by themselves, no push fails meanwhile, the
/// shared budget holds again within seconds, and /readyz never says "shared" while Redis refuses their writes.
@Suite("Limits shared through a Redis failover", .serialized)
struct RedisFailoverTests {
    let shared = SharedLimitsTests()

    /// A primary and its replica, with one password.
    func pair() throws -> (primary: RedisServerProcess, replica: RedisServerProcess) {
        let primary = try RedisServerProcess()
        let replica = try RedisServerProcess(password: primary.password)
        try replica.command("CONFIG", "SET", "masterauth", primary.password)
        try replica.command("REPLICAOF", "127.0.0.1", String(primary.port))
        try Poll.wait(for: "the replica in sync", within: .seconds(20)) {
            (try? replica.command("INFO", "replication").contains("master_link_status:up")) == true
        }
        return (primary, replica)
    }

    /// Two relays with `store` as their `limits_store`, counting on `redis`.
    func cluster(store: String, redis: RedisServerProcess, environment: [String: String] = [:]) throws
        -> SharedLimitsTests.Cluster
    {
        let fixture = try PushFixture(
            relayConfig:
                #""ip_limit":{"requests":100000,"period_s":10,"block_s":10},"limits_store":\#(store),"#
                + #""metrics_listen":"127.0.0.1:0""#,
            relayEnvironment: ["REDIS_PASSWORD": redis.password].merging(environment) { $1 })
        return SharedLimitsTests.Cluster(redis: redis, fixture: fixture, other: try fixture.anotherRelay())
    }

    /// `store` with the settings every test here shares: a timeout a loaded machine always meets (a slow reply
    /// turned into a local decision would put the exact counts off by one), `on_failure` local.
    func store(_ place: String) -> String {
        #"{"kind":"redis",\#(place),"timeout_ms":1000,"on_failure":"local","key_prefix":"duo-relay:"}"#
    }

    /// Pushes for `phone` on both relays until both say "200 shared" (at most `seconds`); every answer must be a
    /// delivery or a 429, never a failure. Returns the statuses seen.
    func pushUntilShared(_ cluster: SharedLimitsTests.Cluster, seconds: Double) throws -> [Int] {
        let token = randomToken()
        let grants = [
            try cluster.fixture.grant(token: token, on: try cluster.fixture.relay.connect()),
            try cluster.fixture.grant(token: token, on: try cluster.other.connect()),
        ]
        var statuses: [Int] = []
        let deadline = Date().addingTimeInterval(seconds)
        var index = 0
        while Date() < deadline {
            let relay = cluster.relays[index % 2]
            let answer = try relay.connect().request(
                "POST", "/v1/push", body: PushFixture.pushBody(grant: grants[index % 2]))
            statuses.append(answer.status)
            index += 1
            if try cluster.relays.allSatisfy({ try shared.limits($0) == "200 shared" }) { break }
            // A pace: a push every 100 ms is one phone's worth (the phone's budget is 20 per 60 s; the statuses
            // only have to be deliveries or 429).
            usleep(100_000)
        }
        return statuses
    }

    /// The shared budget holds across both relays: 21 alternating pushes of a fresh phone give exactly 20
    /// deliveries and one 429; the phone's key is in `primary`.
    func expectOneBudget(_ cluster: SharedLimitsTests.Cluster, primary: RedisServerProcess) throws {
        let answers = try shared.pushAlternating(cluster, token: randomToken(), count: 21)
        #expect(answers.filter { $0.status == 200 }.count == 20)
        #expect(answers.filter { $0.status == 429 }.count == 1)
        #expect(answers.last?.status == 429)
        let keys = try primary.keysWithTTL().map(\.key)
        #expect(keys.contains { $0.hasPrefix("duo-relay:p:") })
    }

    @Test func twoRelaysBehindOneAddressFollowAPrimaryThatKeepsItsClients() throws {
        let (old, new) = try pair()
        // The address both relays use: a managed service's primary endpoint, which moves to the new primary while
        // the old one keeps the connections already made.
        let endpoint = try DelayingForwarder(to: "127.0.0.1", port: old.port, delay: .zero)
        defer { endpoint.stop() }
        let cluster = try cluster(store: store(#""url":"redis://127.0.0.1:\#(endpoint.port)/0""#), redis: old)
        for relay in cluster.relays { #expect(try shared.limits(relay) == "200 shared") }
        #expect(try shared.pushAlternating(cluster, token: randomToken(), count: 4).allSatisfy { $0.status == 200 })

        // The failover: the replica is promoted, the old primary demoted (it answers its clients READONLY).
        try new.command("REPLICAOF", "NO", "ONE")
        try old.command("REPLICAOF", "127.0.0.1", String(new.port))
        endpoint.retarget(port: new.port)
        let start = Date()
        let statuses = try pushUntilShared(cluster, seconds: 20)
        #expect(Date().timeIntervalSince(start) < 20, "shared again within 20 s")
        #expect(!statuses.isEmpty && statuses.allSatisfy { $0 == 200 || $0 == 429 }, "\(statuses)")
        try expectOneBudget(cluster, primary: new)
        for relay in cluster.relays {
            let log = relay.standardError
            #expect(log.contains("leaving Redis at 127.0.0.1:\(endpoint.port): the server is read-only"), "\(log)")
            #expect(log.contains("Redis at 127.0.0.1:\(endpoint.port) is back; limits are shared again"), "\(log)")
            #expect(!relay.allOutput.contains(old.password))
            let scrape = try shared.metrics(relay)
            #expect((shared.sample(scrape, #"duo_relay_limits_store_errors_total{kind="not_primary"}"#) ?? 0) >= 1)
        }
    }

    @Test func aDemotedPrimaryWithNowhereElseToGoIsNeverCalledShared() throws {
        let (old, new) = try pair()
        let cluster = try cluster(store: store(#""url":"redis://127.0.0.1:\#(old.port)/0""#), redis: old)
        for relay in cluster.relays { #expect(try shared.limits(relay) == "200 shared") }
        try new.command("REPLICAOF", "NO", "ONE")
        try old.command("REPLICAOF", "127.0.0.1", String(new.port))
        // Every push is answered (locally), and from the first on, /readyz says "local" for as long as the server
        // refuses writes: each new connection finds it a replica (ROLE) and leaves it.
        let token = randomToken()
        let grant = try cluster.fixture.grant(token: token)
        var readiness: [String] = []
        for _ in 0..<12 {
            let answer = try cluster.fixture.push(grant: grant)
            #expect(answer.status == 200 || answer.status == 429)
            readiness.append(try shared.limits(cluster.fixture.relay))
            // A pace: spread over the reconnection delays (50 ms doubling), so that several attempts are seen.
            usleep(250_000)
        }
        #expect(readiness.allSatisfy { $0 == "200 local" }, "\(readiness)")
        let log = cluster.fixture.relay.standardError
        #expect(log.components(separatedBy: "leaving Redis at").count - 1 == 1, "one line, not one per attempt")
        #expect(!log.contains("is back;"))
        #expect(try new.keysWithTTL().allSatisfy { !$0.key.hasPrefix("duo-relay:p:") }, "the phone was not counted")
    }

    @Test func aServerThatAnswersEveryCallWithAnErrorIsNotShared() throws {
        let redis = try RedisServerProcess()
        let cluster = try cluster(store: store(#""url":"redis://127.0.0.1:\#(redis.port)/0""#), redis: redis)
        let relay = cluster.fixture.relay
        #expect(try shared.limits(relay) == "200 shared")
        let grant = try cluster.fixture.grant(token: randomToken())
        // Out of memory without eviction: Redis refuses every script that may write (OOM), and keeps the connection.
        try redis.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
        try redis.command("CONFIG", "SET", "maxmemory", "1")
        #expect(try cluster.fixture.push(grant: grant).status == 200, "decided locally")
        #expect(try shared.limits(relay) == "200 local")
        let scrape = try shared.metrics(relay)
        #expect(shared.sample(scrape, "duo_relay_limits_store_up") == 0)
        #expect((shared.sample(scrape, #"duo_relay_limits_store_errors_total{kind="script"}"#) ?? 0) >= 1)
        #expect(relay.standardError.contains("answers the limits' calls with errors (script: the script failed (OOM))"))
        try redis.command("CONFIG", "SET", "maxmemory", "0")
        // The next call answered says it counts again (a push is what makes a call).
        try Poll.wait(for: "limits \"200 shared\"", within: .seconds(10)) {
            _ = try? cluster.fixture.push(grant: grant)
            return (try? shared.limits(relay)) == "200 shared"
        }
        #expect(relay.standardError.contains("is back; limits are shared again"))
    }

    @Test func twoRelaysWithSentinelSurviveTheKillOfThePrimary() throws {
        guard RedisSentinelProcess.isInstalled else {
            Issue.record("redis-sentinel is not installed: run scripts/install-deps --test")
            return
        }
        let (old, new) = try pair()
        let sentinelPassword = "sentinel-pw-" + randomToken().prefix(12)
        let sentinel = try RedisSentinelProcess(monitoring: old, password: sentinelPassword)
        // The sentinel must have seen the replica, or it cannot promote it (it answers -failover-abort-no-good-slave).
        #expect(Poll.until(within: .seconds(30)) { sentinel.log.contains("+slave") })
        let place = #""sentinel":{"master":"duo-limits","nodes":["127.0.0.1:\#(sentinel.port)"]}"#
        let cluster = try cluster(
            store: store(place), redis: old, environment: ["REDIS_SENTINEL_PASSWORD": sentinelPassword])
        for relay in cluster.relays {
            #expect(try shared.limits(relay) == "200 shared")
            #expect(relay.standardError.contains("connected to Redis at 127.0.0.1:\(old.port); limits are shared"))
        }
        #expect(try shared.pushAlternating(cluster, token: randomToken(), count: 4).allSatisfy { $0.status == 200 })

        old.stop()
        #expect(
            Poll.until(within: .seconds(30)) { sentinel.log.contains("+switch-master") },
            "the sentinel promoted the replica")
        let promoted = Date()
        let statuses = try pushUntilShared(cluster, seconds: 20)
        #expect(Date().timeIntervalSince(promoted) < 20, "shared again within 20 s of the promotion")
        #expect(statuses.allSatisfy { $0 == 200 || $0 == 429 }, "\(statuses)")
        try expectOneBudget(cluster, primary: new)
        for relay in cluster.relays {
            let log = relay.standardError
            #expect(log.contains("using Redis at 127.0.0.1:\(new.port), the primary now"), "\(log)")
            #expect(!relay.allOutput.contains(old.password))
            #expect(!relay.allOutput.contains(sentinelPassword))
        }

        // The old primary comes back (empty, on its port): the sentinel makes it a replica of the new one, and the
        // relays stay where the writes are.
        try old.restart()
        try old.command("CONFIG", "SET", "masterauth", old.password)
        #expect(Poll.until(within: .seconds(30)) { sentinel.log.contains("+convert-to-slave") })
        try expectOneBudget(cluster, primary: new)
        for relay in cluster.relays { #expect(try shared.limits(relay) == "200 shared") }
    }

    /// What each relay admitted alone counts once Redis is back (docs/DESIGN.md, "Failover"): a phone pushing through
    /// both relays across the kill -9 of the primary, with an outage long enough for both to spend their own budgets,
    /// gets at most what was shared before plus 2 × 20 in the window that spans the outage, then nothing until that
    /// window ends; and exactly 20 in a window wholly after it.
    @Test func aPhoneGetsNoFreshBudgetWhenThePrimaryIsKilled() throws {
        guard RedisSentinelProcess.isInstalled else {
            Issue.record("redis-sentinel is not installed: run scripts/install-deps --test")
            return
        }
        let (old, new) = try pair()
        // The primary is replaced 4 s after it stops answering: time for both relays to use their own budgets.
        let sentinel = try RedisSentinelProcess(monitoring: old, downAfterMilliseconds: 4_000)
        #expect(Poll.until(within: .seconds(30)) { sentinel.log.contains("+slave") })
        let place = #""sentinel":{"master":"duo-limits","nodes":["127.0.0.1:\#(sentinel.port)"]}"#
        let cluster = try cluster(store: store(place), redis: old)
        for relay in cluster.relays { #expect(try shared.limits(relay) == "200 shared") }
        let token = randomToken()
        let connections = try cluster.relays.map { try $0.connect() }
        let grants = try cluster.relays.indices.map { try cluster.fixture.grant(token: token, on: connections[$0]) }
        /// One push for the phone on relay `index`; its status, and the Retry-After of a 429.
        func push(_ index: Int) throws -> (status: Int, retryAfter: Int?) {
            let answer = try connections[index].request(
                "POST", "/v1/push", body: PushFixture.pushBody(grant: grants[index]))
            #expect(answer.status == 200 || answer.status == 429, "\(answer.status) \(answer.text)")
            return (answer.status, answer.headers["retry-after"].flatMap { Int($0) })
        }

        // Shared before the outage: 4, in the window the outage will span (replicated before the kill).
        let windowStart = Date()
        let before = try (0..<4).map { try push($0 % 2).status }
        #expect(before == [200, 200, 200, 200])
        try Poll.wait(for: "the count on the replica", within: .seconds(10)) {
            (try? new.keysWithTTL().first { $0.key.hasPrefix("duo-relay:p:") }).flatMap { $0 }.map { key in
                (try? new.command("HGET", key.key, "c").trimmingCharacters(in: .whitespacesAndNewlines)) == "4"
            } ?? false
        }

        // kill -9 of the primary: each relay counts alone, with its own budget, until both refuse.
        old.stop()
        for relay in cluster.relays {
            try Poll.wait(for: "limits \"200 local\"", within: .seconds(10)) {
                (try? shared.limits(relay)) == "200 local"
            }
        }
        var alone = [0, 0]
        var refusedAlone = [false, false]
        for index in 0..<60 where !refusedAlone.allSatisfy({ $0 }) {
            let status = try push(index % 2).status
            if status == 200 { alone[index % 2] += 1 } else { refusedAlone[index % 2] = true }
        }
        try #require(!sentinel.log.contains("+switch-master"), "the outage lasted while both relays counted alone")
        #expect(alone == [20, 20], "each relay admitted its own budget alone")

        // The replica is promoted; once both relays count there again, the phone has nothing left in this window.
        #expect(
            Poll.until(within: .seconds(30)) { sentinel.log.contains("+switch-master") },
            "the sentinel promoted the replica")
        var afterwards: [Int] = []
        var retryAfter: Int?
        try Poll.wait(for: "both relays shared again", within: .seconds(20)) {
            let answer = try push(afterwards.count % 2)
            afterwards.append(answer.status)
            retryAfter = answer.retryAfter
            return try cluster.relays.allSatisfy { try shared.limits($0) == "200 shared" }
        }
        let answer = try push(afterwards.count % 2)
        afterwards.append(answer.status)
        retryAfter = answer.retryAfter
        // The window that spans the outage is the one the first push opened: it ends 60 s after it.
        let windowEnd = windowStart.addingTimeInterval(60)
        let remaining = try #require(retryAfter, "a 429 says when the phone may push again")
        #expect(
            abs(Date().addingTimeInterval(Double(remaining)).timeIntervalSince(windowEnd)) < 5,
            "refused until the window that spans the outage ends (\(remaining) s)")
        // Nothing more until it ends: a push every 2 s, through both relays.
        while Date().addingTimeInterval(2) < windowEnd {
            afterwards.append(try push(afterwards.count % 2).status)
            usleep(2_000_000)
        }
        #expect(afterwards.allSatisfy { $0 == 429 }, "\(afterwards)")
        let delivered = before.filter { $0 == 200 }.count + alone.reduce(0, +) + afterwards.filter { $0 == 200 }.count
        #expect(delivered <= 4 + 2 * 20, "\(delivered) in the window that spans the outage")

        // A window wholly after it: exactly 20, through both relays.
        while Date() < windowEnd.addingTimeInterval(2) { usleep(200_000) }
        let next = try (0..<21).map { try push($0 % 2).status }
        #expect(next.filter { $0 == 200 }.count == 20, "\(next)")
        #expect(next.last == 429)
        for relay in cluster.relays {
            #expect(!relay.allOutput.contains(old.password))
            #expect(!relay.allOutput.contains(token))
        }
    }

    @Test func aSwitchAnnouncedByTheSentinelIsFollowedWithoutWaitingForACall() throws {
        guard RedisSentinelProcess.isInstalled else {
            Issue.record("redis-sentinel is not installed: run scripts/install-deps --test")
            return
        }
        let (old, new) = try pair()
        let sentinel = try RedisSentinelProcess(monitoring: old)
        #expect(Poll.until(within: .seconds(30)) { sentinel.log.contains("+slave") })
        let place = #""sentinel":{"master":"duo-limits","nodes":["127.0.0.1:\#(sentinel.port)"]}"#
        let cluster = try cluster(store: store(place), redis: old)
        for relay in cluster.relays { #expect(try shared.limits(relay) == "200 shared") }
        // A switch-over the operator asks for: the old primary stays up (demoted, it keeps its clients), and no push
        // comes to find it read-only. The sentinel's +switch-master alone moves the relays.
        #expect(try sentinel.command("SENTINEL", "FAILOVER", "duo-limits").contains("OK"))
        #expect(Poll.until(within: .seconds(30)) { sentinel.log.contains("+switch-master") })
        for relay in cluster.relays {
            try Poll.wait(for: "the relay on the new primary", within: .seconds(20)) {
                relay.standardError.contains("using Redis at 127.0.0.1:\(new.port), the primary now")
            }
            #expect(
                relay.standardError.contains(
                    "leaving Redis at 127.0.0.1:\(old.port): the sentinels moved the primary to 127.0.0.1:\(new.port)"),
                "\(relay.standardError)")
            try Poll.wait(for: "limits \"200 shared\"", within: .seconds(20)) {
                (try? shared.limits(relay)) == "200 shared"
            }
        }
        try expectOneBudget(cluster, primary: new)
    }

    @Test func sentinelsUnreachableAtStartAreAskedUntilTheyAnswer() throws {
        guard RedisSentinelProcess.isInstalled else {
            Issue.record("redis-sentinel is not installed: run scripts/install-deps --test")
            return
        }
        let primary = try RedisServerProcess()
        let sentinel = try RedisSentinelProcess(monitoring: primary, start: false)
        let place = #""sentinel":{"master":"duo-limits","nodes":["127.0.0.1:\#(sentinel.port)"]}"#
        let cluster = try cluster(store: store(place), redis: primary)
        for relay in cluster.relays {
            #expect(try shared.limits(relay) == "200 local")
            #expect(
                relay.standardError.contains("no sentinel named the primary of duo-limits"), "\(relay.standardError)")
        }
        // Served meanwhile, by each relay's own limiter.
        #expect(try cluster.fixture.push(grant: try cluster.fixture.grant(token: randomToken())).status == 200)
        try sentinel.start()
        for relay in cluster.relays {
            // The reconnection delay grows to 5 s at most: asked again within that.
            try Poll.wait(for: "limits \"200 shared\"", within: .seconds(20)) {
                (try? shared.limits(relay)) == "200 shared"
            }
            #expect(relay.standardError.contains("Redis at 127.0.0.1:\(primary.port)"))
        }
        try expectOneBudget(cluster, primary: primary)
    }
}
