import EventLoops
import Foundation
import MonotonicTime
import RedisTestSupport
import RelayCore
import RelayCrypto
import RelayTestSupport
import Synchronization
import Testing

@testable import RelayServer

/// What a relay admitted alone while Redis was away reaches a real redis-server once it is back, before any decision
/// is made there (docs/DESIGN.md, "Failover"): every key, whatever their number (sent in batches), each counted once.
@Suite("What was admitted alone is carried over to Redis", .serialized)
struct CarryOverToRedisTests {
    static let allowed: (LimitDecision, LimitDecision?) = (.allowed, .allowed)

    @Test func everyKeyAdmittedAloneIsCountedInRedisOnceBeforeTheNextDecisionThere() throws {
        let redis = try RedisServerProcess()
        let loop = try EventLoop(name: "carry-over-test")
        defer { loop.stop() }
        var settings = LimitsStore()
        settings.kind = .redis
        settings.url = RedisURL(host: "127.0.0.1", port: redis.port)
        settings.timeoutMilliseconds = 1_000
        let store = try SharedLimitsStore(
            settings: settings, password: redis.password, sentinelPassword: nil, loops: [loop])
        defer { store.shutdown() }
        let limits = SharedLimits(
            addressPolicy: LimitPolicy(requests: 100_000, periodSeconds: 60),
            phonePolicy: LimitPolicy(requests: 20, periodSeconds: 60), capacity: 10_000, store: store,
            clock: SystemClock())
        store.start()
        #expect(store.health == .shared)

        /// One request's decisions, on the worker's loop.
        func admit(_ address: LimiterKey, _ phone: LimiterKey) throws -> (LimitDecision, LimitDecision?) {
            try loop.performAndWait {
                let box = DecisionBox()
                limits.admit(worker: 0, address: address, phone: phone) { box.set($0, $1) }
                return box
            }.wait()
        }
        let address = LimiterKey.address([192, 0, 2, 1], secret: [1, 2, 3])
        let phones = (0..<700).map { LimiterKey.phone(token: Array("phone \($0)".utf8)) }

        redis.stop()
        try Poll.wait(for: "the store lost", within: .seconds(10)) { store.health == .local }
        // 700 phones (more than two batches of 288 keys), once each; one of them 25 times: 20 admitted alone.
        for phone in phones { #expect(try admit(address, phone) == Self.allowed) }
        let busy = phones[0]
        for _ in 0..<24 { _ = try admit(address, busy) }

        try redis.restart()
        try Poll.wait(for: "limits shared again", within: .seconds(20)) { store.health == .shared }
        // Every phone and the address (counted at once: one redis-cli run a key would outlast the windows).
        #expect(try redis.command("DBSIZE").trimmingCharacters(in: .whitespacesAndNewlines) == "701")
        func count(_ key: LimiterKey, _ kind: Character) throws -> String {
            let name = String(decoding: key.storeKey(prefix: "duo-relay:", kind: kind), as: UTF8.self)
            return try redis.command("HGET", name, "c").trimmingCharacters(in: .whitespacesAndNewlines)
        }
        for (key, kind) in [(address, Character("a")), (busy, "p"), (phones[699], "p")] {
            let name = String(decoding: key.storeKey(prefix: "duo-relay:", kind: kind), as: UTF8.self)
            let ttl = Int(try redis.command("PTTL", name).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -3
            #expect(ttl > 0 && ttl <= 60_000, "expires with its window: \(ttl) ms")
        }
        // What was admitted, not what was asked: 700 + 24 for the address, 20 for the busy phone, 1 for the others.
        #expect(try count(address, "a") == "724")
        #expect(try count(busy, "p") == "20")
        #expect(try count(phones[699], "p") == "1")
        // The next decision is made in Redis, on top of what was carried.
        #expect(try admit(address, phones[699]) == Self.allowed)
        #expect(try count(phones[699], "p") == "2")
        if case .limited = try admit(address, busy).1 {} else { Issue.record("the busy phone has used its budget") }
    }
}

/// A request's two decisions, once its completion has run.
private final class DecisionBox: Sendable {
    private let decisions = Mutex<(LimitDecision, LimitDecision?)?>(nil)

    func set(_ address: LimitDecision, _ phone: LimitDecision?) { decisions.withLock { $0 = (address, phone) } }

    func wait() throws -> (LimitDecision, LimitDecision?) {
        try #require(Poll.value(within: .seconds(10)) { decisions.withLock { $0 } }, "the decisions came")
    }
}
