import MonotonicTime
import RelayCrypto
import Testing

@testable import RelayCore

/// What an instance admitted alone and still owes a shared store (docs/DESIGN.md, "Failover"), on a test clock:
/// only admissions, only windows still open, each taken once, given back only to the window it came from.
@Suite struct CarryOverTests {
    let second: UInt64 = 1_000_000_000
    let policy = LimitPolicy(requests: 20, periodSeconds: 60)
    /// The test clock's origin.
    let origin: Instant = 0

    func key(_ n: Int) -> LimiterKey { LimiterKey(digest: SHA256.hash(Array(String(n).utf8))) }

    @Test func aWindowCarriesWhatItAdmittedAndHowOldItIs() {
        let start = origin + 1_000 * second
        var window = LimitWindow(start: start)
        #expect(window.carryOver(now: start, policy: policy) == nil, "nothing admitted")
        for offset in 0..<25 { _ = window.admit(now: start + UInt64(offset) * second / 10, policy: policy) }
        // 25 asked, 20 admitted: the refusals were not admissions.
        let carried = window.carryOver(now: start + 7 * second, policy: policy)
        #expect(carried?.count == 20)
        #expect(carried?.age == 7 * second)
        // Still open one nanosecond before its end; passed at it (its admissions' shared window has passed too).
        #expect(window.carryOver(now: start + 60 * second - 1, policy: policy)?.count == 20)
        #expect(window.carryOver(now: start + 60 * second, policy: policy) == nil)
        // A new window starts with nothing owed.
        #expect(window.admit(now: start + 60 * second, policy: policy) == .allowed)
        #expect(window.carryOver(now: start + 61 * second, policy: policy)?.count == 1)
    }

    @Test func aBlockedWindowCarriesItsAdmissionsWhileItsPeriodLasts() {
        let address = LimitPolicy(requests: 3, periodSeconds: 10, blockSeconds: 30)
        var window = LimitWindow(start: 0)
        for _ in 0..<5 { _ = window.admit(now: origin + second, policy: address) }
        #expect(window.carryOver(now: origin + 9 * second, policy: address)?.count == 3)
        #expect(
            window.carryOver(now: origin + 10 * second, policy: address) == nil, "blocked, but its window has passed")
    }

    @Test func theLimiterHandsOverEachAdmissionOnce() {
        let limiter = InMemoryRateLimiter(policy: policy, capacity: 1_000)
        let t0 = origin + 500 * second
        for _ in 0..<30 { _ = limiter.admit(key(1), now: t0) }
        for _ in 0..<3 { _ = limiter.admit(key(2), now: t0 + 10 * second) }
        let first = limiter.takeCarryOver(now: t0 + 20 * second, limit: 100)
        #expect(
            Set(first.map { "\($0.count) \($0.age / second)" }) == ["20 20", "3 10"],
            "each key's admissions and its window's age")
        #expect(limiter.takeCarryOver(now: t0 + 20 * second, limit: 100).isEmpty, "taken once")
        // Admitted since: only those are owed.
        _ = limiter.admit(key(2), now: t0 + 21 * second)
        let later = limiter.takeCarryOver(now: t0 + 22 * second, limit: 100)
        #expect(later.map(\.count) == [1])
        #expect(later.first?.key == key(2))
        // The limiter still limits as before: the handing over changed no count.
        #expect(limiter.admit(key(1), now: t0 + 22 * second) == .limited(retryAfter: 38))
    }

    @Test func onlyWindowsStillOpenAreCarriedAndAtMostTheLimitAtATime() {
        let limiter = InMemoryRateLimiter(policy: policy, capacity: 10_000)
        for n in 0..<100 { _ = limiter.admit(key(n), now: Instant(nanoseconds: UInt64(n) * second)) }
        // At 100 s, the windows opened before 40 s have passed.
        var taken: [CarriedAdmissions] = []
        while true {
            let round = limiter.takeCarryOver(now: origin + 100 * second, limit: 7)
            #expect(round.count <= 7)
            if round.isEmpty { break }
            taken += round
        }
        #expect(taken.count == 59)
        #expect(Set(taken.map(\.key)) == Set((41..<100).map(key)))
    }

    @Test func whatWasNotTakenIsGivenBackToItsOwnWindowOnly() {
        let limiter = InMemoryRateLimiter(policy: policy, capacity: 1_000)
        for _ in 0..<5 { _ = limiter.admit(key(1), now: 0) }
        for _ in 0..<4 { _ = limiter.admit(key(2), now: 0) }
        let taken = limiter.takeCarryOver(now: origin + second, limit: 100)
        #expect(taken.count == 2)
        // Key 2's window passes and a new one opens before the store's answer is given up on.
        _ = limiter.admit(key(2), now: origin + 61 * second)
        limiter.restore(taken)
        let again = limiter.takeCarryOver(now: origin + 62 * second, limit: 100)
        // Key 1's window has passed too by now: nothing of it; key 2 owes only its new window's admission.
        #expect(again.map(\.count) == [1])
        limiter.restore(again)
        #expect(
            limiter.takeCarryOver(now: origin + 62 * second, limit: 100).map(\.count) == [1], "given back, taken again")
    }

    @Test func memoryStaysBoundedUnderAFloodOfKeysAdmittedAlone() {
        let limiter = InMemoryRateLimiter(policy: policy, capacity: 1_600)
        for n in 0..<20_000 { _ = limiter.admit(key(n), now: Instant(nanoseconds: UInt64(n))) }
        #expect(limiter.trackedKeys <= 1_600)
        var owed = 0
        while case let round = limiter.takeCarryOver(now: origin + second, limit: 500), !round.isEmpty {
            owed += round.count
        }
        #expect(owed == limiter.trackedKeys, "what is owed is what is held, no more")
    }
}
