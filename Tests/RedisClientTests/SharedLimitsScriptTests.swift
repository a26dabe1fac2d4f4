import Foundation
import MonotonicTime
import RedisClient
import RedisTestSupport
import RelayTestSupport
import Testing

@testable import RelayCore

/// The Lua script on a real redis-server decides exactly as `LimitWindow` does: the same sequence of
/// requests, with the same (explicit) times, gets the same decisions, and every key expires when its
/// window or block has passed; for the address, and for the phone behind an admitted address.
@Suite("The shared window script against LimitWindow", .serialized)
struct SharedWindowScriptTests {
    struct Case: Sendable, CustomStringConvertible {
        let policy: LimitPolicy
        let seed: UInt64
        /// Counted as the phone, behind an address that is always admitted (else as the address, alone).
        var asPhone = false
        var description: String {
            "\(asPhone ? "phone" : "address"): \(policy.requests) per \(policy.period / 1_000_000_000) s, "
                + "block \(policy.block / 1_000_000_000) s"
        }
    }

    static let policies = [
        (LimitPolicy(requests: 3, periodSeconds: 10), UInt64(1)),
        (LimitPolicy(requests: 3, periodSeconds: 10, blockSeconds: 5), 2),
        (LimitPolicy(requests: 10, periodSeconds: 10, blockSeconds: 10), 3),
        (LimitPolicy(requests: 20, periodSeconds: 60), 4),
        (LimitPolicy(requests: 1, periodSeconds: 1, blockSeconds: 30), 5),
    ]
    static let cases =
        policies.map { Case(policy: $0.0, seed: $0.1) } + policies.map { Case(policy: $0.0, seed: $0.1, asPhone: true) }

    /// An address policy that admits everything these tests send.
    static let open = LimitPolicy(requests: 1_000_000, periodSeconds: 3_600)

    @Test(arguments: cases)
    func sameSequenceSameDecisions(_ testCase: Case) throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedLimitsScript.source)
        defer { pipeline.shutdown() }
        try #require(pipeline.isConnected, "cannot reach the test redis-server")
        var random = SplitMix64(seed: testCase.seed)
        let keys = (0..<3).map { LimiterKey.phone(token: [UInt8($0), 1, 2]) }
        let address = LimiterKey.address([192, 0, 2, 7], secret: [1, 2, 3])
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
            let instant = Instant(nanoseconds: now * 1_000)
            var window = windows[key] ?? LimitWindow(start: instant)
            let expected = window.admit(now: instant, policy: testCase.policy)
            windows[key] = window
            let decision: LimitDecision?
            if testCase.asPhone {
                let answer = try #require(
                    pipeline.answerAndWait(
                        keys: [address.storeKey(prefix: "t:", kind: "a"), key.storeKey(prefix: "t:", kind: "p")],
                        arguments: SharedLimitsScript.arguments(
                            address: Self.open, phone: testCase.policy, nowMicroseconds: now))
                ).get()
                let decisions = SharedLimitsScript.decisions(address: answer.first, phone: answer.second)
                #expect(decisions?.address == .allowed)
                decision = decisions?.phone
            } else {
                let answer = try #require(
                    pipeline.answerAndWait(
                        keys: [key.storeKey(prefix: "t:", kind: "a")],
                        arguments: SharedLimitsScript.arguments(
                            address: testCase.policy, phone: Self.open, nowMicroseconds: now))
                ).get()
                #expect(answer.second == nil, "no phone was named")
                decision = SharedLimitsScript.decision(answer.first)
            }
            #expect(decision == expected, "step \(step)")
            if expected != .allowed { limited += 1 }
        }
        // The sequence exercised both outcomes.
        #expect(limited > 10)
        let longest = max(testCase.policy.period, testCase.policy.block) / 1_000_000 + 1_000
        let kind = testCase.asPhone ? "p" : "a"
        for (key, ttl) in try server.keysWithTTL() where key.hasPrefix("t:\(kind):") {
            #expect(key.count == 4 + 64)
            #expect(ttl > 0 && ttl <= Int(longest), "\(key) expires in \(ttl) ms")
        }
    }

    @Test func aKeyEvictedEarlyOnlyLetsItsPhoneStartAfresh() throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedLimitsScript.source)
        defer { pipeline.shutdown() }
        let policy = LimitPolicy(requests: 2, periodSeconds: 10, blockSeconds: 30)
        let key = "t:a:evicted"
        func admit(at seconds: UInt64) throws -> LimitDecision? {
            let reply = try #require(
                pipeline.evaluateAndWait(
                    keys: [Array(key.utf8)],
                    arguments: SharedLimitsScript.arguments(
                        address: policy, phone: policy,
                        nowMicroseconds: 1_764_583_200_000_000 + seconds * 1_000_000)))
            return SharedLimitsScript.decision(try reply.get())
        }
        #expect(try [admit(at: 0), admit(at: 1), admit(at: 2)] == [.allowed, .allowed, .limited(retryAfter: 30)])
        #expect(try admit(at: 3) == .limited(retryAfter: 29))
        // As maxmemory eviction would: the key is gone, the count starts again, never a block.
        try server.command("DEL", key)
        #expect(try [admit(at: 4), admit(at: 5)] == [.allowed, .allowed])
        // A key of another type (not ours) fails the script: the caller falls back, nothing crashes.
        try server.command("SET", key, "x")
        let reply = try #require(
            pipeline.evaluateAndWait(
                keys: [Array(key.utf8)], arguments: SharedLimitsScript.arguments(address: policy, phone: policy)))
        #expect(throws: RedisClientError(.script, "")) { try reply.get() }
        #expect(pipeline.isConnected)
    }

    @Test func theServersOwnClockIsUsedWithoutATimeArgument() throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedLimitsScript.source)
        defer { pipeline.shutdown() }
        let policy = LimitPolicy(requests: 2, periodSeconds: 60)
        let key = [UInt8]("t:p:server-clock".utf8)
        var decisions: [LimitDecision?] = []
        for _ in 0..<3 {
            let value = try #require(
                pipeline.evaluateAndWait(
                    keys: [key], arguments: SharedLimitsScript.arguments(address: policy, phone: policy)))
            decisions.append(SharedLimitsScript.decision(try value.get()))
        }
        #expect(decisions == [.allowed, .allowed, .limited(retryAfter: 60)])
        let ttl = try #require(try server.keysWithTTL().first?.ttl)
        #expect(ttl > 58_000 && ttl <= 60_000)
    }
}

/// One call decides the address and then, only if the address is admitted, the phone (docs/DESIGN.md, "Several
/// instances"), on a real redis-server.
@Suite("The shared limits script: address, then phone", .serialized)
struct SharedLimitsScriptTests {
    static let address = Array("t:a:one-address".utf8)
    static let phone = Array("t:p:one-phone".utf8)

    /// The count kept for `key`.
    static func count(_ server: RedisServerProcess, _ key: String) throws -> String {
        try server.command("HGET", key, "c").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func decide(
        _ pipeline: RedisPipeline, address: LimitPolicy, phone: LimitPolicy, phoneKey: Bool = true
    ) throws -> (address: LimitDecision, phone: LimitDecision?) {
        let answer = try #require(
            pipeline.answerAndWait(
                keys: phoneKey ? [Self.address, Self.phone] : [Self.address],
                arguments: SharedLimitsScript.arguments(address: address, phone: phone))
        ).get()
        return try #require(SharedLimitsScript.decisions(address: answer.first, phone: answer.second))
    }

    @Test func aLimitedAddressDoesNotCountThePhone() throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedLimitsScript.source)
        defer { pipeline.shutdown() }
        let address = LimitPolicy(requests: 2, periodSeconds: 60, blockSeconds: 30)
        let phone = LimitPolicy(requests: 10, periodSeconds: 60)
        let decisions = try (0..<5).map { _ in try Self.decide(pipeline, address: address, phone: phone) }
        #expect(
            decisions.map(\.address) == [.allowed, .allowed] + Array(repeating: .limited(retryAfter: 30), count: 3))
        #expect(decisions.map(\.phone) == [.allowed, .allowed, nil, nil, nil])
        // The phone counted only the two requests its address let through.
        #expect(try Self.count(server, "t:p:one-phone") == "2")
        // Requests made while blocked do not count (nor extend the block): the address's count stopped at 3.
        #expect(try Self.count(server, "t:a:one-address") == "3")
    }

    @Test func anAdmittedAddressWithALimitedPhoneCountsBoth() throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedLimitsScript.source)
        defer { pipeline.shutdown() }
        let address = LimitPolicy(requests: 100, periodSeconds: 10)
        let phone = LimitPolicy(requests: 3, periodSeconds: 60)
        let decisions = try (0..<5).map { _ in try Self.decide(pipeline, address: address, phone: phone) }
        #expect(decisions.allSatisfy { $0.address == .allowed })
        #expect(
            decisions.map(\.phone) == [
                .allowed, .allowed, .allowed, .limited(retryAfter: 60), .limited(retryAfter: 60),
            ])
        #expect(try Self.count(server, "t:a:one-address") == "5")
        #expect(try Self.count(server, "t:p:one-phone") == "5")
        // Each key expires with its own window.
        let ttls = Dictionary(uniqueKeysWithValues: try server.keysWithTTL().map { ($0.key, $0.ttl) })
        #expect(try #require(ttls["t:a:one-address"]) <= 10_000)
        #expect(try #require(ttls["t:p:one-phone"]) > 10_000)
    }

    @Test func anAddressAloneIsDecidedAndNoPhoneIsTouched() throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedLimitsScript.source)
        defer { pipeline.shutdown() }
        let address = LimitPolicy(requests: 2, periodSeconds: 10)
        let phone = LimitPolicy(requests: 1, periodSeconds: 60)
        let decisions = try (0..<3).map { _ in
            try Self.decide(pipeline, address: address, phone: phone, phoneKey: false)
        }
        #expect(decisions.map(\.address) == [.allowed, .allowed, .limited(retryAfter: 10)])
        #expect(decisions.allSatisfy { $0.phone == nil })
        #expect(try server.keysWithTTL().map(\.key) == ["t:a:one-address"])
    }
    /// A call whose key counts do not match its keys is refused before anything is counted (the pipeline never
    /// sends one; a script run on its own, or another client's mistake, must not count a key as the wrong limit).
    @Test(arguments: [
        (["t:a:x", "t:p:x"], "1"), (["t:a:x"], "2"), (["t:a:x", "t:p:x", "t:a:y"], "11"), (["t:a:x"], "3"),
        (["t:a:x"], ""),
    ])
    func keyCountsThatDoNotMatchTheKeysAreRefusedAndCountNothing(keys: [String], counts: String) throws {
        let server = try RedisServerProcess()
        let policy = LimitPolicy(requests: 10, periodSeconds: 60)
        let arguments = SharedLimitsScript.arguments(address: policy, phone: policy).map {
            String(decoding: $0, as: UTF8.self)
        }
        let reply = try server.command(
            ["EVAL", SharedLimitsScript.source, String(keys.count)] + keys + arguments + [counts, "0000000000000001"])
        #expect(reply.contains("ERR"), "\(reply)")
        #expect(try server.keysWithTTL().isEmpty)
        // The same call with matching counts is answered: the tag, then one answer a request.
        let matching = String(repeating: "1", count: keys.count)
        let answered = try server.command(
            ["EVAL", SharedLimitsScript.source, String(keys.count)] + keys + arguments + [matching, "0000000000000001"])
        #expect(answered.split(separator: "\n").first == "0000000000000001", "\(answered)")
        #expect(try server.keysWithTTL().count == Set(keys).count)
    }
}
