import Dispatch
import Foundation
import RelayCore
import RelayCrypto
import Synchronization
import Testing

@testable import RelayServer

/// The provider token's life by the relay's clock (docs/DESIGN.md, "Provider token"): replaced before it is 50 minutes
/// old, never more often than once per 20 minutes, except once after APNs answered ExpiredProviderToken. Signing is
/// the signing thread's (`refreshIfDue`, called here where the thread would call it); a push only reads the token in
/// force.
@Suite struct ProviderTokenTests {
    let clock = ManualClock()
    let signer = TestSigner()
    let token: ProviderToken

    init() {
        token = ProviderToken(
            credentials: ProviderCredentials(keyID: "KEY1234567", teamID: "TEAM123456", signer: signer), clock: clock)
    }

    /// The token a push sends after the signing thread had its turn.
    func sent() throws -> String {
        token.refreshIfDue()
        return try #require(token.token())
    }

    /// After APNs called `expired` expired: the token the retry goes with (nil: no retry), the signing thread's turn
    /// taken when it is wanted.
    func afterExpiry(of expired: String) -> String? {
        let signed = Mutex<String??>(nil)
        switch token.afterExpiry(of: expired, whenSigned: { token in signed.withLock { $0 = .some(token) } }) {
        case .retry(let newer): return newer
        case .refused: return nil
        case .signing:
            token.refreshIfDue()
            return signed.withLock { $0 } ?? nil
        }
    }

    @Test func everyTokenSentIsYoungerThan50MinutesAndNoneReplacedWithin20() throws {
        var signedAt: [String: Double] = [:]
        var elapsed = 0.0
        // A push every 30 seconds for six hours.
        while elapsed <= 6 * 3_600 {
            let current = try sent()
            if signedAt[current] == nil { signedAt[current] = elapsed }
            #expect(elapsed - signedAt[current]! < 50 * 60)
            clock.advance(seconds: 30)
            elapsed += 30
        }
        let times = signedAt.values.sorted()
        #expect(token.refreshes == times.count)
        #expect(times.count >= 8)
        for (earlier, later) in zip(times, times.dropFirst()) {
            #expect(later - earlier >= 20 * 60)
        }
    }

    @Test func theSameTokenIsSentUntilItsRefreshAge() throws {
        let first = try sent()
        clock.advance(seconds: Double(ProviderToken.refreshAge / 1_000_000_000) - 1)
        #expect(token.refreshIfDue() == .notDue)
        #expect(try sent() == first)
        clock.advance(seconds: 1)
        #expect(try sent() != first)
        #expect(token.refreshes == 2)
    }

    /// The `authorization` value is made once per token: it always names the token sent now, also after a refresh
    /// forced by ExpiredProviderToken.
    @Test func theAuthorizationValueIsBearerAndTheTokenSentNow() throws {
        token.refreshIfDue()
        let first = try #require(token.authorization())
        #expect(first.token == (try sent()))
        #expect(first.header == "bearer " + first.token)
        let forced = try #require(afterExpiry(of: first.token))
        let second = try #require(token.authorization())
        #expect(second.token == forced)
        #expect(second.header == "bearer " + forced)
        clock.advance(seconds: Double(ProviderToken.refreshAge / 1_000_000_000))
        token.refreshIfDue()
        let third = try #require(token.authorization())
        #expect(third.token != forced)
        #expect(third.header == "bearer " + third.token)
        #expect(token.refreshes == 3)
    }

    @Test func expiredProviderTokenGetsOneNewTokenPer20Minutes() throws {
        let first = try sent()
        clock.advance(seconds: 60)
        // The exception: a token APNs calls expired is replaced at once, though it is a minute old.
        let second = try #require(afterExpiry(of: first))
        #expect(second != first)
        // A concurrent push that was refused with the first token retries with the second.
        #expect(afterExpiry(of: first) == second)
        // APNs calls the new token expired too (a wrong wall clock): no new token within 20 minutes.
        clock.advance(seconds: 19 * 60)
        #expect(afterExpiry(of: second) == nil)
        #expect(try sent() == second)
        #expect(token.refreshes == 2)
        clock.advance(seconds: 60)
        let third = try #require(afterExpiry(of: second))
        #expect(third != second)
        #expect(token.refreshes == 3)
    }

    /// A push never signs: reading the token costs no signature, however old the token is, until the signing thread
    /// replaces it.
    @Test func readingTheTokenNeverSigns() throws {
        let first = try sent()
        #expect(signer.signatures == 1)
        clock.advance(seconds: Double(ProviderToken.refreshAge / 1_000_000_000) + 60)
        for _ in 0..<1_000 { #expect(token.token() == first) }
        #expect(signer.signatures == 1)
        #expect(token.nextRefresh <= clock.monotonicNow)
        #expect(try sent() != first)
        #expect(signer.signatures == 2)
    }

    /// A key that cannot sign (a token away): the token in force serves until it is no longer valid, the signing is
    /// retried with a doubling wait, the first failure is marked as the one to report, and the first success after
    /// failures as a recovery.
    @Test func aKeyThatCannotSignLeavesTheTokenInForceWhileItIsValid() throws {
        let first = try sent()
        clock.advance(seconds: Double(ProviderToken.refreshAge / 1_000_000_000))
        signer.failing.store(true, ordering: .relaxed)
        guard case .failed(_, first: true) = token.refreshIfDue() else {
            Issue.record("the first failure is not marked first")
            return
        }
        #expect(token.token() == first)
        #expect(token.refreshIfDue() == .notDue)
        var waits: [UInt64] = []
        for _ in 0..<8 {
            let wait = token.nextRefresh.nanoseconds - clock.monotonicNow.nanoseconds
            waits.append(wait / 1_000_000_000)
            clock.advance(seconds: Double(wait) / 1e9)
            guard case .failed(_, first: false) = token.refreshIfDue() else {
                Issue.record("a further failure is marked first, or the retry was not made")
                return
            }
        }
        #expect(waits == [1, 2, 4, 8, 16, 32, 60, 60])
        #expect(token.token() == first)
        // Past its validity the token is no longer sent: APNs would refuse it.
        clock.advance(seconds: Double((ProviderToken.validity - ProviderToken.refreshAge) / 1_000_000_000))
        #expect(token.token() == nil)
        signer.failing.store(false, ordering: .relaxed)
        clock.advance(seconds: 60)
        #expect(token.refreshIfDue() == .signed(recovered: true))
        #expect(token.token() != nil && token.token() != first)
    }

    /// A refresh asked for after ExpiredProviderToken that the key cannot sign: whoever waits for it is told (its push
    /// answered 502), and a later ExpiredProviderToken may ask again.
    @Test func aForcedRefreshThatFailsTellsItsWaiters() throws {
        let first = try sent()
        signer.failing.store(true, ordering: .relaxed)
        let told = Mutex<[String?]>([])
        #expect(token.afterExpiry(of: first) { token in told.withLock { $0.append(token) } } == .signing)
        #expect(told.withLock { $0 }.isEmpty)
        token.refreshIfDue()
        #expect(told.withLock { $0 } == [nil])
        signer.failing.store(false, ordering: .relaxed)
        #expect(afterExpiry(of: first) != nil)
    }

    /// When the signing thread stops (its gateway retired, the relay stopping), a push waiting for a token after
    /// ExpiredProviderToken is answered at once rather than left waiting, and no later one waits.
    @Test func closingAnswersWhoeverWaits() throws {
        let first = try sent()
        let told = Mutex<[String?]>([])
        #expect(token.afterExpiry(of: first) { token in told.withLock { $0.append(token) } } == .signing)
        token.close()
        #expect(told.withLock { $0 } == [nil])
        #expect(token.afterExpiry(of: first) { _ in Issue.record("a closed token took a waiter") } == .refused)
        #expect(token.token() == first)
    }

    /// The signing thread: while the key takes its time (a network HSM; here until the test lets it go), a push reads
    /// the token in force at once, and the new token is in force as soon as it is signed.
    @Test func noPushWaitsWhileTheSigningThreadSigns() throws {
        let clock = SharedClock()
        let slow = TestSigner()
        let token = ProviderToken(
            credentials: ProviderCredentials(keyID: "KEY1234567", teamID: "TEAM123456", signer: slow),
            clock: clock.clock)
        let refresher = ProviderTokenRefresher(
            token: token, clock: clock.clock,
            problems: APNsProblemReporter(environment: "sandbox", clock: clock.clock),
            keyDescription: "key id KEY1234567",
            name: "duo-sign-test")
        defer {
            slow.release()
            refresher.stop()
        }
        #expect(refresher.start() == .signed(recovered: false))
        let first = try #require(token.token())
        slow.holding.store(true, ordering: .relaxed)
        clock.clock.advance(seconds: Double(ProviderToken.refreshAge / 1_000_000_000))
        refresher.wake()
        #expect(slow.waitUntilSigning(), "the signing thread did not start signing")
        let started = DispatchTime.now()
        for _ in 0..<100 { #expect(token.token() == first) }
        #expect(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds < 500_000_000)
        slow.release()
        var replaced = false
        for _ in 0..<500 where !replaced {
            replaced = token.token() != first
            if !replaced { usleep(10_000) }
        }
        #expect(replaced, "the token signed on the signing thread was not put in force")
    }
}

/// A manual clock that a test's threads share.
struct SharedClock: Sendable {
    let clock = ManualClock()
}

/// A key in memory that counts its signatures, can fail (a token away) and can be held in the middle of a signature
/// (a slow HSM) until the test releases it.
final class TestSigner: ProviderTokenSigner {
    let key = P256.Signing.PrivateKey()
    let failing = Atomic<Bool>(false)
    let holding = Atomic<Bool>(false)
    private let count = Atomic<Int>(0)
    private let entered = DispatchSemaphore(value: 0)
    private let gate = DispatchSemaphore(value: 0)

    var publicKey: P256.Signing.PublicKey { key.publicKey }
    var signatures: Int { count.load(ordering: .relaxed) }

    func es256Signature(for signingInput: [UInt8]) throws(CryptoError) -> [UInt8] {
        if holding.load(ordering: .relaxed) {
            entered.signal()
            gate.wait()
        }
        if failing.load(ordering: .relaxed) { throw CryptoError(.signingFailed, "C_Sign failed: CKR_DEVICE_REMOVED") }
        count.add(1, ordering: .relaxed)
        return try key.es256Signature(for: signingInput)
    }

    func waitUntilSigning() -> Bool {
        entered.wait(timeout: .now() + 10) == .success
    }

    func release() {
        if holding.exchange(false, ordering: .relaxed) { gate.signal() }
    }
}
