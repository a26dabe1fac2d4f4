import RedisClient
import RedisTestSupport
import RelayTestSupport
import Testing

@testable import RelayCore

/// The Lua script on a real redis-server decides exactly as `LimitWindow` does: the same sequence of
/// requests, with the same (explicit) times, gets the same decisions, and every key expires when its
/// window or block has passed.
@Suite("The shared window script against LimitWindow", .serialized)
struct SharedWindowScriptTests {
    struct Case: Sendable, CustomStringConvertible {
        let policy: LimitPolicy
        let seed: UInt64
        var description: String {
            "\(policy.requests) per \(policy.period / 1_000_000_000) s, block \(policy.block / 1_000_000_000) s"
        }
    }

    static let cases = [
        Case(policy: LimitPolicy(requests: 3, periodSeconds: 10), seed: 1),
        Case(policy: LimitPolicy(requests: 3, periodSeconds: 10, blockSeconds: 5), seed: 2),
        Case(policy: LimitPolicy(requests: 10, periodSeconds: 10, blockSeconds: 10), seed: 3),
        Case(policy: LimitPolicy(requests: 20, periodSeconds: 60), seed: 4),
        Case(policy: LimitPolicy(requests: 1, periodSeconds: 1, blockSeconds: 30), seed: 5),
    ]

    @Test(arguments: cases)
    func sameSequenceSameDecisions(_ testCase: Case) throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedWindowScript.source)
        defer { pipeline.shutdown() }
        try #require(pipeline.isConnected, "cannot reach the test redis-server")
        var random = SplitMix64(seed: testCase.seed)
        let keys = (0..<3).map { LimiterKey.phone(token: [UInt8($0), 1, 2]) }
        var windows: [LimiterKey: LimitWindow] = [:]
        // Microseconds since the Unix epoch, as Redis's TIME would give them: large numbers must survive Lua.
        var now: UInt64 = 1_764_583_200_123_456
        var limited = 0
        for step in 0..<400 {
            // Mostly bursts, now and then a pause past a window or a block.
            // Steps of up to a quarter of the period per request over the limit, so windows fill up.
            let period = testCase.policy.period / 1_000
            let burstStep = period / UInt64(testCase.policy.requests) / 4
            now += random.next() % 64 == 0 ? random.next() % (2 * period + 1) : random.next() % (burstStep + 1)
            let key = keys[Int(random.next() % UInt64(keys.count))]
            var window = windows[key] ?? LimitWindow(start: now * 1_000)
            let expected = window.admit(now: now * 1_000, policy: testCase.policy)
            windows[key] = window
            let reply = pipeline.evaluateAndWait(
                keys: [key.storeKey(prefix: "t:", kind: "p")],
                arguments: SharedWindowScript.arguments(testCase.policy, nowMicroseconds: now))
            let value = try #require(reply).get()
            #expect(SharedWindowScript.decision(value) == expected, "step \(step)")
            if expected != .allowed { limited += 1 }
        }
        // The sequence exercised both outcomes.
        #expect(limited > 10)
        let longest = max(testCase.policy.period, testCase.policy.block) / 1_000_000 + 1_000
        for (key, ttl) in try server.keysWithTTL() {
            #expect(key.hasPrefix("t:p:") && key.count == 4 + 64)
            #expect(ttl > 0 && ttl <= Int(longest), "\(key) expires in \(ttl) ms")
        }
    }

    @Test func aKeyEvictedEarlyOnlyLetsItsPhoneStartAfresh() throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedWindowScript.source)
        defer { pipeline.shutdown() }
        let policy = LimitPolicy(requests: 2, periodSeconds: 10, blockSeconds: 30)
        let key = "t:a:evicted"
        func admit(at seconds: UInt64) throws -> LimitDecision? {
            let reply = try #require(
                pipeline.evaluateAndWait(
                    keys: [Array(key.utf8)],
                    arguments: SharedWindowScript.arguments(
                        policy, nowMicroseconds: 1_764_583_200_000_000 + seconds * 1_000_000)))
            return SharedWindowScript.decision(try reply.get())
        }
        #expect(try [admit(at: 0), admit(at: 1), admit(at: 2)] == [.allowed, .allowed, .limited(retryAfter: 30)])
        #expect(try admit(at: 3) == .limited(retryAfter: 29))
        // As maxmemory eviction would: the key is gone, the count starts again, never a block.
        try server.command("DEL", key)
        #expect(try [admit(at: 4), admit(at: 5)] == [.allowed, .allowed])
        // A key of another type (not ours) fails the script: the caller falls back, nothing crashes.
        try server.command("SET", key, "x")
        let reply = try #require(
            pipeline.evaluateAndWait(keys: [Array(key.utf8)], arguments: SharedWindowScript.arguments(policy)))
        #expect(throws: RedisClientError(.script, "")) { try reply.get() }
        #expect(pipeline.isConnected)
    }

    @Test func theServersOwnClockIsUsedWithoutATimeArgument() throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedWindowScript.source)
        defer { pipeline.shutdown() }
        let policy = LimitPolicy(requests: 2, periodSeconds: 60)
        let key = [UInt8]("t:p:server-clock".utf8)
        var decisions: [LimitDecision?] = []
        for _ in 0..<3 {
            let value = try #require(
                pipeline.evaluateAndWait(keys: [key], arguments: SharedWindowScript.arguments(policy)))
            decisions.append(SharedWindowScript.decision(try value.get()))
        }
        #expect(decisions == [.allowed, .allowed, .limited(retryAfter: 60)])
        let ttl = try #require(try server.keysWithTTL().first?.ttl)
        #expect(ttl > 58_000 && ttl <= 60_000)
    }
}
