import Foundation
import RedisTestSupport
import RelayCore
import RelayCrypto
import RelayTestSupport
import Synchronization
import Testing

@testable import RelayServer

/// A relay with `limits_store: redis` is freed, with its shared limiters and their in-memory windows, as soon as
/// whoever ran it lets go: `duo-relay serve` exits right after `runUntilSignalled()` returns, and a relay still
/// being torn down on another thread then would be reported by LeakSanitizer as the two limiters leaked.
@Suite(.serialized) struct SharedLimiterLifetimeTests {
    /// A relay on a loopback port whose limits are counted in a throwaway redis-server.
    struct Fixture {
        let redis: RedisServerProcess
        let setup: RelaySetup
        let keys = RelayKeys([1: SymmetricKey.generate()])

        init() throws {
            redis = try RedisServerProcess()
            setup = try RelaySetup.countingIn(redis, keys: keys)
        }

        /// A relay on this setup and its two shared limiters, after a request through each limit.
        func relayAfterBothLimits() throws -> (relay: Relay, address: SharedRateLimiter, phone: SharedRateLimiter) {
            let relay = try Relay(setup: setup)
            let limiters = relay.sharedLimiters
            try #require(limiters.count == 2)
            try useBothLimits(relay)
            return (relay, limiters[0], limiters[1])
        }

        /// Sends requests through both limits, each decided by Redis: a push (answered 502 `apns` once the
        /// per-phone limit has admitted it, as no APNs environment is configured) and a request for no endpoint.
        private func useBothLimits(_ relay: Relay) throws {
            let grant = try GrantCodec.seal(
                Grant(environment: .sandbox, issuedAt: SystemClock().unixSeconds, token: SecureRandom.bytes(count: 32)),
                keyID: 1, keys: keys)
            let client = try RawHTTPClient(port: relay.port)
            let sealed = Base64.encode(SecureRandom.bytes(count: PushRequest.sealedByteCount))
            let body = PushBody.bytes(grant: grant, sealed: sealed)
            #expect(try client.request("POST", "/v1/push", body: body).error == "apns")
            #expect(try client.request("GET", "/v1/nothing-here").status == 404)
        }
    }

    @Test func theLimitersAreFreedWithTheRelayAfterStop() throws {
        let fixture = try Fixture()
        defer { fixture.redis.stop() }
        weak var addressLimiter: SharedRateLimiter?
        weak var phoneLimiter: SharedRateLimiter?
        do {
            let (relay, address, phone) = try fixture.relayAfterBothLimits()
            (addressLimiter, phoneLimiter) = (address, phone)
            relay.stop()
        }
        #expect(addressLimiter == nil, "the per-address limiter outlives its relay")
        #expect(phoneLimiter == nil, "the per-phone limiter outlives its relay")
    }

    /// As `duo-relay serve` runs it: a signal stops it, and when `runUntilSignalled()` returns, the caller's reference
    /// is the last one (nothing the stop started still holds the relay), so the relay is freed before the process exits.
    @Test func theLimitersAreFreedWithTheRelayWhenASignalStopsIt() throws {
        let fixture = try Fixture()
        defer { fixture.redis.stop() }
        // Ignored until the relay's handler is in place, so that an early signal is lost rather than fatal.
        signal(SIGUSR1, SIG_IGN)
        weak var addressLimiter: SharedRateLimiter?
        weak var phoneLimiter: SharedRateLimiter?
        let runner: SignalledRunner
        do {
            let (relay, address, phone) = try fixture.relayAfterBothLimits()
            (addressLimiter, phoneLimiter) = (address, phone)
            runner = SignalledRunner(relay)
        }
        // Sent until the relay has stopped: the first ones may come before its handler is installed.
        let lastReference = Poll.value(within: .seconds(30), every: .milliseconds(50)) { () -> Bool? in
            if let outcome = runner.outcome { return outcome }
            kill(getpid(), SIGUSR1)
            return nil
        }
        #expect(lastReference == true, "when runUntilSignalled returned, something else still held the relay")
        #expect(Poll.until(within: .seconds(5)) { phoneLimiter == nil }, "the per-phone limiter outlives its relay")
        #expect(addressLimiter == nil, "the per-address limiter outlives its relay")
    }
}

/// Runs a relay until SIGUSR1 on a thread of its own, which holds the only reference to it.
private final class SignalledRunner: Sendable {
    private let relay: Mutex<Relay?>
    private let returned = Mutex<Bool?>(nil)

    init(_ relay: Relay) {
        self.relay = Mutex(relay)
        Thread { [self] in run() }.start()
    }

    /// Nil while the relay runs; then whether the runner's reference was the only one when it returned.
    var outcome: Bool? { returned.withLock { $0 } }

    private func run() {
        guard var relay = self.relay.withLock({ $0.take() }) else { return }
        relay.runUntilSignalled(stoppingOn: [SIGUSR1], reloadingOn: SIGUSR2)
        let unique = isKnownUniquelyReferenced(&relay)
        returned.withLock { $0 = unique }
    }
}
