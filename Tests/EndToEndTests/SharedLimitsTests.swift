import Foundation
import RedisTestSupport
import RelayTestSupport
import Testing

/// Two relay processes sharing one redis-server (docs/DESIGN.md, "Several instances"): together they admit
/// exactly what one would, survive Redis going away and coming back, and leave nothing but prefixed
/// hashes with expiries in it.
@Suite("Limits shared by two instances through Redis", .serialized)
struct SharedLimitsTests {
    struct Cluster {
        let redis: RedisServerProcess
        let fixture: PushFixture
        let other: RelayProcess
        var relays: [RelayProcess] { [fixture.relay, other] }
    }

    func cluster(
        ipLimit: String = #"{"requests":100000,"period_s":10,"block_s":10}"#, onFailure: String = "local",
        // Long enough that a loaded machine never turns a slow reply into a local decision (which would
        // make the exact counts below off by one); a stopped Redis is noticed at once anyway (reset).
        timeoutMilliseconds: Int = 1_000, redis: RedisServerProcess? = nil, password: String? = nil
    ) throws -> Cluster {
        let redis = try redis ?? RedisServerProcess()
        let store =
            #"{"kind":"redis","url":"redis://127.0.0.1:\#(redis.port)/0","timeout_ms":\#(timeoutMilliseconds),"#
            + #""on_failure":"\#(onFailure)","key_prefix":"duo-relay:"}"#
        let fixture = try PushFixture(
            relayConfig: #""ip_limit":\#(ipLimit),"limits_store":\#(store),"metrics_listen":"127.0.0.1:0""#,
            relayEnvironment: ["REDIS_PASSWORD": password ?? redis.password])
        return Cluster(redis: redis, fixture: fixture, other: try fixture.anotherRelay())
    }

    /// `/readyz`'s status and `"limits"`, as "200 shared".
    func limits(_ relay: RelayProcess) throws -> String {
        let response = try relay.connect().request("GET", "/readyz")
        return "\(response.status) \(response.json?["limits"] as? String ?? "-")"
    }

    /// The relay's `/metrics` text, from its metrics listener.
    func metrics(_ relay: RelayProcess) throws -> String { try relay.scrapeMetrics() }

    /// The value of one sample line (`name{labels}`) in a scrape.
    func sample(_ text: String, _ series: String) -> Double? { RelayProcess.sample(text, series) }

    /// Pushes `count` times for one phone, alternating instances and grants (one minted by each).
    func pushAlternating(_ cluster: Cluster, token: String, count: Int) throws -> [RawHTTPClient.Response] {
        let grants = [
            try cluster.fixture.grant(token: token, on: try cluster.fixture.relay.connect()),
            try cluster.fixture.grant(token: token, on: try cluster.other.connect()),
        ]
        let connections = try cluster.relays.map { try $0.connect() }
        return try (0..<count).map { index in
            try connections[index % 2].request(
                "POST", "/v1/push", body: PushFixture.pushBody(grant: grants[(index / 2) % 2]))
        }
    }

    @Test func twoInstancesAdmitExactlyTwentyPushesPerPhone() throws {
        let cluster = try cluster()
        for relay in cluster.relays { #expect(try limits(relay) == "200 shared") }
        let token = randomToken()
        let answers = try pushAlternating(cluster, token: token, count: 30)
        #expect(answers.filter { $0.status == 200 }.count == 20)
        let refused = answers.filter { $0.status == 429 }
        #expect(refused.count == 10)
        #expect(refused.allSatisfy { $0.error == "rate_limited" && $0.headers["retry-after"] != nil })
        #expect(cluster.fixture.waitForDeliveries(20).count == 20)

        // Redis holds only prefixed SHA-256 / keyed hashes, each expiring within its window (+1 s).
        let keys = try cluster.redis.keysWithTTL()
        #expect(!keys.isEmpty)
        let pattern = try Regex("^duo-relay:[pa]:[0-9a-f]{64}$")
        for (key, ttl) in keys {
            #expect(key.wholeMatch(of: pattern) != nil, "unexpected key \(key)")
            #expect(!key.contains(token))
            let longest = key.hasPrefix("duo-relay:p:") ? 61_000 : 11_000
            #expect(ttl > 0 && ttl <= longest, "\(key) expires in \(ttl) ms")
        }
        for relay in cluster.relays {
            #expect(!relay.allOutput.contains(cluster.redis.password))
            #expect(!relay.allOutput.contains(token))
        }
    }

    @Test func twoInstancesAdmitExactlyTheAddressBudget() throws {
        let cluster = try cluster(ipLimit: #"{"requests":10,"period_s":10,"block_s":10}"#)
        let connections = try cluster.relays.map { try $0.connect() }
        // Every /v1/ request counts, whichever instance it reaches (404s too).
        let answers = try (0..<16).map { try connections[$0 % 2].request("GET", "/v1/nothing-here") }
        #expect(answers.prefix(10).allSatisfy { $0.status == 404 })
        #expect(answers.suffix(6).allSatisfy { $0.status == 429 && $0.error == "rate_limited" })
        #expect(answers.last?.headers["retry-after"] == "10")
    }

    @Test func redisStoppedMidBurstFallsBackLocallyAndSharingResumes() throws {
        let cluster = try cluster()
        let token = randomToken()
        let first = try pushAlternating(cluster, token: token, count: 6)
        #expect(first.allSatisfy { $0.status == 200 })
        let before = try metrics(cluster.fixture.relay)
        #expect(sample(before, "duo_relay_limits_store_up") == 1)
        #expect(sample(before, #"duo_relay_limits_store_state{state="shared"}"#) == 1)
        // One round trip per request, both limits in one script call (docs/DESIGN.md, "Several instances"): the 3
        // pushes and the grant this instance answered.
        #expect((sample(before, "duo_relay_limits_store_latency_seconds_count") ?? 0) >= 4)

        cluster.redis.stop()
        // Every request is answered within timeout_ms (1 s) + a margin that holds on a loaded machine,
        // by each instance's own limiter: no 503s, and every instance admits at most 20 on its own.
        let connection = try cluster.fixture.relay.connect()
        let grant = try cluster.fixture.grant(token: token, on: connection)
        var outcomes: [Int] = []
        for _ in 0..<25 {
            let start = Date()
            outcomes.append(try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: grant)).status)
            // Wall-clock: a separate relay process and redis-server; 2 s is far above an answer's few ms.
            #expect(Date().timeIntervalSince(start) < 2)
        }
        #expect(Set(outcomes).isSubset(of: [200, 429]))
        #expect(outcomes.filter { $0 == 200 }.count <= 20)
        for relay in cluster.relays {
            try Poll.wait(for: "limits \"200 local\"", within: .seconds(15)) { (try? limits(relay)) == "200 local" }
        }
        let during = try metrics(cluster.fixture.relay)
        #expect(sample(during, "duo_relay_limits_store_up") == 0)
        #expect(sample(during, #"duo_relay_limits_store_state{state="local"}"#) == 1)
        #expect((sample(during, #"duo_relay_limits_store_fallback_total{limit="phone",decision="local"}"#) ?? 0) >= 20)
        let faults = ["closed", "refused", "timeout"].compactMap {
            sample(during, #"duo_relay_limits_store_errors_total{kind="\#($0)"}"#)
        }
        #expect(faults.reduce(0, +) >= 1)

        try cluster.redis.restart()
        for relay in cluster.relays {
            try Poll.wait(for: "limits \"200 shared\"", within: .seconds(15)) { (try? limits(relay)) == "200 shared" }
        }
        // A fresh phone is counted across both again: exactly 20.
        let answers = try pushAlternating(cluster, token: randomToken(), count: 24)
        #expect(answers.filter { $0.status == 200 }.count == 20)
        for relay in cluster.relays {
            let log = relay.standardError
            #expect(log.components(separatedBy: "limits store: lost Redis").count - 1 == 1, "\(log)")
            #expect(log.components(separatedBy: "is back; limits are shared again").count - 1 == 1)
            #expect(!log.contains(cluster.redis.password))
        }
    }

    @Test func refuseAnswers503WhileRedisIsAway() throws {
        let cluster = try cluster(onFailure: "refuse")
        let token = randomToken()
        let grant = try cluster.fixture.grant(token: token)
        cluster.redis.stop()
        let connection = try cluster.fixture.relay.connect()
        let start = Date()
        let answer = try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: grant))
        // Wall-clock: a separate relay process; a stopped store must not make it wait (2 s is generous).
        #expect(Date().timeIntervalSince(start) < 2)
        #expect(answer.status == 503)
        #expect(answer.error == "overloaded")
        #expect(answer.headers["retry-after"] != nil)
        try Poll.wait(for: "limits \"503 unavailable\"", within: .seconds(15)) {
            (try? limits(cluster.fixture.relay)) == "503 unavailable"
        }
        try cluster.redis.restart()
        try Poll.wait(for: "limits \"200 shared\"", within: .seconds(15)) {
            (try? limits(cluster.fixture.relay)) == "200 shared"
        }
        #expect(try cluster.fixture.push(grant: grant).status == 200)
    }

    @Test func aWrongPasswordCountsLocallyAndSaysWhyWithoutThePassword() throws {
        let cluster = try cluster(password: "wrong-password-0123")
        for relay in cluster.relays {
            #expect(try limits(relay) == "200 local")
            // Named as what it is, not as a Redis that was lost (it was never had).
            #expect(
                relay.standardError.contains(
                    "refused the relay's credentials: the password or user name is wrong (WRONGPASS)"))
            #expect(!relay.standardError.contains("lost Redis"))
            #expect(!relay.allOutput.contains("wrong-password-0123"))
        }
        let grant = try cluster.fixture.grant(token: randomToken())
        #expect(try cluster.fixture.push(grant: grant).status == 200)
        #expect(try cluster.redis.keysWithTTL().isEmpty)
    }

    @Test func aURLWithAPasswordIsRefusedByCheckAndServeWithoutPrintingIt() throws {
        let secrets = TestSecrets()
        let config = RelayProcess.config(
            extra: #""limits_store":{"kind":"redis","url":"redis://relay:s3cr3t-in-url@127.0.0.1:6379/0"}"#)
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.json").path
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        for command in ["check", "serve"] {
            let process = try RelayProcess(arguments: [command, "--config", path], environment: secrets.environment)
            #expect(try process.waitForExit() == 1)
            #expect(process.allOutput.contains("limits_store.url"))
            #expect(!process.allOutput.contains("s3cr3t-in-url"))
        }
    }
}
