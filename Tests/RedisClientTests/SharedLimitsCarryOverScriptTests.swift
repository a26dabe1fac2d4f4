import Foundation
import MonotonicTime
import RedisClient
import RedisTestSupport
import RelayTestSupport
import Synchronization
import Testing

@testable import RelayCore

/// What an instance admitted alone, added by the script on a real redis-server (docs/DESIGN.md, "Failover"): to the
/// key's window when one is open, as a window of its own (opened when the instance's opened) when none is, never to
/// a blocked key, never for a window that has passed; with explicit times.
@Suite("The shared limits script: carrying over what was admitted alone", .serialized)
struct SharedLimitsCarryOverScriptTests {
    static let phone = LimitPolicy(requests: 20, periodSeconds: 60)
    static let address = LimitPolicy(requests: 10, periodSeconds: 10, blockSeconds: 30)
    /// Microseconds since the Unix epoch, as the server's TIME would give them.
    static let origin: UInt64 = 1_764_583_200_000_000
    static let second: UInt64 = 1_000_000

    let server: RedisServerProcess
    let pipeline: RedisPipeline

    init() throws {
        server = try RedisServerProcess()
        pipeline = try RedisPipeline.connected(to: server, script: SharedLimitsScript.source)
    }

    /// One decision of the phone `key` (behind an address that is always admitted) at `seconds` after the origin.
    func decide(_ key: String, at seconds: UInt64) throws -> LimitDecision? {
        let answer = try #require(
            pipeline.answerAndWait(
                keys: [Array("t:a:open".utf8), Array(key.utf8)],
                arguments: SharedLimitsScript.arguments(
                    address: LimitPolicy(requests: 1_000_000, periodSeconds: 3_600), phone: Self.phone,
                    nowMicroseconds: Self.origin + seconds * Self.second))
        ).get()
        return SharedLimitsScript.decisions(address: answer.first, phone: answer.second)?.phone
    }

    /// Carries `admissions` (each key with its kind, count and window age in seconds) at `seconds`; the answer.
    func carry(_ admissions: [(key: String, kind: Character, count: Int, age: UInt64)], at seconds: UInt64) throws
        -> Int64
    {
        try #require(
            pipeline.evaluateAndWait(
                keys: admissions.map { Array($0.key.utf8) },
                arguments: SharedLimitsScript.carryOverArguments(
                    address: Self.address, phone: Self.phone,
                    admissions: admissions.map { ($0.kind, $0.count, $0.age * 1_000_000_000) },
                    nowMicroseconds: Self.origin + seconds * Self.second))
        ).get()
    }

    func field(_ key: String, _ name: String) throws -> String {
        try server.command("HGET", key, name).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func admissionsAreAddedToTheWindowStillOpen() throws {
        defer { pipeline.shutdown() }
        for second in 0..<4 { #expect(try decide("t:p:one", at: UInt64(second)) == .allowed) }
        // Two instances, each with 20 admitted alone during an outage from 5 s on.
        #expect(try carry([("t:p:one", "p", 20, 3)], at: 8) == 1)
        #expect(try carry([("t:p:one", "p", 20, 2)], at: 8) == 1)
        #expect(try field("t:p:one", "c") == "44")
        // The window that spans the outage has given all it had: nothing until it ends, at 60 s.
        #expect(try decide("t:p:one", at: 9) == .limited(retryAfter: 51))
        #expect(try decide("t:p:one", at: 59) == .limited(retryAfter: 1))
        // A window wholly after it: the whole budget.
        let after = try (0..<21).map { try decide("t:p:one", at: 60 + UInt64($0)) }
        #expect(after.filter { $0 == .allowed }.count == 20)
        #expect(after.last == .limited(retryAfter: 40))
    }

    @Test func withNoWindowOpenTheInstancesWindowBecomesTheKeys() throws {
        defer { pipeline.shutdown() }
        // A new primary that never had the key: the instance's window opened 10 s ago, so the key's ends in 50 s.
        #expect(try carry([("t:p:new", "p", 20, 10)], at: 100) == 1)
        #expect(try field("t:p:new", "c") == "20")
        #expect(try field("t:p:new", "s") == String(Self.origin + 90 * Self.second))
        let ttl = try #require(try server.keysWithTTL().first { $0.key == "t:p:new" }?.ttl)
        #expect(ttl > 49_000 && ttl <= 50_000, "the key expires with the instance's window: \(ttl) ms")
        #expect(try decide("t:p:new", at: 101) == .limited(retryAfter: 49))
        #expect(try decide("t:p:new", at: 150) == .allowed)
    }

    @Test func aWindowThatHasPassedOrABlockedKeyTakesNothing() throws {
        defer { pipeline.shutdown() }
        // The instance's window opened a whole period ago: its admissions belong to a window that has passed.
        #expect(try carry([("t:p:passed", "p", 5, 60)], at: 100) == 0)
        #expect(try server.keysWithTTL().allSatisfy { $0.key != "t:p:passed" })
        // An address blocked in Redis stays as it is: the block already refuses everything.
        let blocked = "t:a:blocked"
        for second in 0..<11 {
            _ = pipeline.evaluateAndWait(
                keys: [Array(blocked.utf8)],
                arguments: SharedLimitsScript.arguments(
                    address: Self.address, phone: Self.phone, nowMicroseconds: Self.origin + UInt64(second) * 1_000))
        }
        let blockedUntil = try field(blocked, "b")
        #expect(blockedUntil != "0")
        #expect(try carry([(blocked, "a", 7, 1)], at: 5) == 0)
        #expect(try field(blocked, "c") == "11")
        #expect(try field(blocked, "b") == blockedUntil)
    }

    @Test func oneRequestCarriesSeveralKeysOfBothKindsEachWithItsPolicy() throws {
        defer { pipeline.shutdown() }
        // The address's window is 10 s long, the phone's 60 s: an age of 20 s has passed for the one, not the other.
        let carried = try carry(
            [("t:a:x", "a", 3, 2), ("t:p:x", "p", 4, 20), ("t:a:y", "a", 5, 20), ("t:p:y", "p", 6, 0)], at: 50)
        #expect(carried == 3)
        #expect(try field("t:a:x", "c") == "3")
        #expect(try field("t:p:x", "c") == "4")
        #expect(try field("t:p:y", "c") == "6")
        let keys = try server.keysWithTTL()
        #expect(Set(keys.map(\.key)) == ["t:a:x", "t:p:x", "t:p:y"])
        // Nothing but counters and window starts, each expiring with its window.
        for (key, ttl) in keys {
            #expect(ttl > 0 && ttl <= (key.hasPrefix("t:a:") ? 10_000 : 60_000), "\(key) expires in \(ttl) ms")
            let fields = try server.command("HKEYS", key).split(separator: "\n").map(String.init).sorted()
            #expect(fields == ["b", "c", "s"])
        }
        // Requests with the same carry-over arguments may share a call: each is applied with its own keys.
        let call = RedisPipeline.prepare(
            script: SharedLimitsScript.source, keyLengths: [6],
            arguments: SharedLimitsScript.carryOverArguments(
                address: Self.address, phone: Self.phone, admissions: [("p", 2, 1_000_000_000)]))
        let answered = Answers()
        for key in ["t:p:j1", "t:p:j2"] {
            #expect(pipeline.evaluate(call, keys: [Array(key.utf8)]) { result in answered.add(result) })
        }
        #expect(Poll.until(within: .seconds(30)) { answered.count == 2 })
        #expect(answered.all.allSatisfy { (try? $0.get().first) == 1 })
        #expect(try field("t:p:j1", "c") == "2")
        #expect(try field("t:p:j2", "c") == "2")
    }
}

/// The answers a pipeline gave, as they come.
private final class Answers: Sendable {
    private let answers = Mutex<[Result<RedisScriptAnswer, RedisClientError>]>([])

    func add(_ answer: Result<RedisScriptAnswer, RedisClientError>) { answers.withLock { $0.append(answer) } }
    var all: [Result<RedisScriptAnswer, RedisClientError>] { answers.withLock { $0 } }
    var count: Int { all.count }
}
