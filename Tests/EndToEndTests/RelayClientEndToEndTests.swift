import APNsSimulator
import DuoRelayClient
import Foundation
import RelayCore
import RelayCrypto
import RelayTestSupport
import Testing

/// `DuoRelayClient` against the real relay and the simulator: every outcome reached.
@Suite struct RelayClientEndToEndTests {
    static let faults = [
        TokenFault(prefix: "410", fault: .status(410, reason: "Unregistered")),
        TokenFault(prefix: "429", fault: .status(429, reason: "TooManyRequests")),
        TokenFault(prefix: "5100", fault: .stall),
        TokenFault(prefix: "60a", fault: .goaway),
    ]

    static func token(_ prefix: String = "") -> String {
        prefix + String(randomToken().dropFirst(prefix.count))
    }

    static func randomPush() -> RelayPush {
        RelayPush(
            sealed: Data(SecureRandom.bytes(count: RelayPush.sealedByteCount)), id: PushFixture.hex64(),
            thread: PushFixture.hex64())
    }

    static func makeFixture(extra: String = "", apns: String = "") throws -> PushFixture {
        try PushFixture(
            relayConfig: #""ip_limit":{"requests":100000,"period_s":10,"block_s":10}"# + extra, apnsConfig: apns,
            tokenFaults: faults)
    }

    func grant(_ client: RelayClient, _ token: String) async throws -> String {
        let outcome = await client.grant(token: token, environment: .sandbox)
        guard case .granted(let grant, let expiresAt) = outcome else { throw TestFailure("no grant: \(outcome)") }
        #expect(expiresAt > Date().addingTimeInterval(29 * 86_400))
        return grant
    }

    @Test func everyPushOutcomeAndEveryGrantOutcome() async throws {
        let fixture = try Self.makeFixture(extra: #","push_limit":{"requests":2,"period_s":60}"#)
        let relay = try #require(URL(string: "http://127.0.0.1:\(fixture.relay.port)"))
        let client = RelayClient(relay: relay, timeout: .seconds(15))

        let push = Self.randomPush()
        let fine = try await grant(client, Self.token("ff"))
        let windowOpened = ContinuousClock.now
        guard case .delivered(let apnsID) = await client.push(push, grant: fine) else {
            Issue.record("not delivered")
            return
        }
        let delivered = fixture.waitForDeliveries(1)
        #expect(delivered.map(\.apnsID) == [try #require(apnsID)])
        #expect(delivered.first?.collapseID == push.id)

        // The same phone's second push spends its limit of 2; the third is told to wait.
        guard case .delivered = await client.push(Self.randomPush(), grant: fine) else {
            Issue.record("the second push was not delivered")
            return
        }
        guard case .retry(let after, .phoneLimit) = await client.push(Self.randomPush(), grant: fine) else {
            Issue.record("the phone's limit did not answer")
            return
        }
        // The wait is what is left of the phone's 60-second window, however long the pushes took here. Wall-clock:
        // the window is the relay's (a separate process); bounded by what passed since it opened.
        let elapsed = windowOpened.duration(to: .now)
        #expect(
            (after ?? .zero) >= .seconds(60) - elapsed && (after ?? .zero) <= .seconds(60),
            "\(String(describing: after))")

        let gone = try await grant(client, Self.token("410"))
        #expect(await client.push(push, grant: gone) == .dropRegistration)

        let busy = try await grant(client, Self.token("429"))
        #expect(await client.push(push, grant: busy) == .retry(after: .seconds(30), reason: .apnsLimit))

        let refused = try await grant(client, Self.token("60a"))
        let goaways = fixture.simulator.statistics.goawaysSent
        #expect(await client.push(push, grant: refused) == .failed(mayHaveBeenDelivered: true))
        #expect(fixture.simulator.statistics.goawaysSent > goaways)

        #expect(await client.push(push, grant: "AQE" + fine) == .renewGrant(expired: false))
        let keys = RelayKeys(fixture.secrets.relayKeys.mapValues { try! SymmetricKey(bytes: $0) })
        let old = try GrantCodec.seal(
            Grant(environment: .sandbox, issuedAt: UInt64(Date().timeIntervalSince1970) - 2_592_000, token: [1, 2]),
            keyID: 1, keys: keys)
        #expect(await client.push(push, grant: old) == .renewGrant(expired: true))

        let short = RelayPush(sealed: Data(count: 100), id: push.id, thread: push.thread)
        #expect(
            await client.push(short, grant: fine) == .rejected("sealed: must be standard base64 of exactly 2934 bytes"))

        #expect(await client.grant(token: Self.token(), environment: .production) == .environmentUnavailable)
        #expect(
            await client.grant(token: "abc", environment: .sandbox)
                == .rejected("token: must be even-length hex, 2 to 1024 characters"))
    }

    @Test func deadlinesOverloadAndAnAbsentRelay() async throws {
        let fixture = try Self.makeFixture(
            extra: #","server":{"max_pushes_in_flight":1}"#, apns: #""timeout_ms":4000"#)
        let relay = try #require(URL(string: "http://127.0.0.1:\(fixture.relay.port)"))
        let client = RelayClient(relay: relay, timeout: .seconds(15))
        let stalled = try await grant(client, Self.token("5100"))

        let fine = try await grant(client, Self.token("ff"))
        // While the relay waits for APNs on its one allowed push, the next one is shed: 503. The
        // stalled push is in flight once the simulator has counted it.
        let before = fixture.simulator.statistics.requests
        let first = Task { await client.push(Self.randomPush(), grant: stalled) }
        await Poll.suspendUntil(within: .seconds(20)) { fixture.simulator.statistics.requests != before }
        #expect(fixture.simulator.statistics.requests == before + 1)
        let shed = await client.push(Self.randomPush(), grant: fine)
        #expect(shed == .retry(after: .seconds(1), reason: .overloaded))
        // The stalled push is answered 502 at the relay's APNs deadline: it may have arrived.
        #expect(await first.value == .failed(mayHaveBeenDelivered: true))

        // The call's own deadline ends it, long before the relay's APNs timeout would.
        let started = ContinuousClock.now
        #expect(
            await client.push(Self.randomPush(), grant: stalled, timeout: .milliseconds(500))
                == .failed(mayHaveBeenDelivered: true))
        // Wall-clock: the call's deadline is real time (URLSession) against a separate relay; 0.5 s, bounded at 3.
        #expect(ContinuousClock.now - started < .seconds(3))

        // Nothing listens there: the push certainly did not arrive.
        let nowhere = RelayClient(relay: try #require(URL(string: "http://127.0.0.1:1")), timeout: .seconds(5))
        #expect(await nowhere.push(Self.randomPush(), grant: fine) == .failed(mayHaveBeenDelivered: false))
        #expect(await nowhere.grant(token: "abcd", environment: .sandbox) == .failed)
    }

    /// The client's timeout is the deadline of the whole call, resends and waits included: against a stalled APNs,
    /// `push(_:grant:retrying:)` returns within its timeout, not after several.
    @Test func theTimeoutIsTheDeadlineOfARetryingCall() async throws {
        let fixture = try Self.makeFixture(apns: #""timeout_ms":1500"#)
        let relay = try #require(URL(string: "http://127.0.0.1:\(fixture.relay.port)"))
        let client = RelayClient(relay: relay, timeout: .seconds(3))
        let stalled = try await grant(client, Self.token("5100"))
        // Without the deadline: five sends of 1.5 s each, and 1.5 s of waits between them.
        let policy = RetryPolicy(maxAttempts: 5, maxWait: .seconds(5), backoff: .milliseconds(100))
        var started = ContinuousClock.now
        #expect(
            await client.push(Self.randomPush(), grant: stalled, retrying: policy)
                == .failed(mayHaveBeenDelivered: true))
        var elapsed = ContinuousClock.now - started
        // Ended by the deadline, or sooner when the next wait would have passed it. Wall-clock: the client's
        // deadline is real time (URLSession) against a separate relay; 2 s of margin over the 3 s deadline.
        #expect(elapsed < .seconds(5), "\(elapsed)")
        // A timeout given to the call is its deadline too.
        started = ContinuousClock.now
        #expect(
            await client.push(Self.randomPush(), grant: stalled, retrying: policy, timeout: .seconds(2))
                == .failed(mayHaveBeenDelivered: true))
        elapsed = ContinuousClock.now - started
        // Wall-clock, as above: 2 s of margin.
        #expect(elapsed < .seconds(4), "\(elapsed)")
    }

    @Test func oneConnectionIsReusedAndTheRetryHelperResendsOnlyWhatIsSafe() async throws {
        let fixture = try Self.makeFixture(extra: #","push_limit":{"requests":3,"period_s":60}"#)
        let forwarder = try CountingForwarder(to: fixture.relay.port)
        let client = RelayClient(
            relay: try #require(URL(string: "http://127.0.0.1:\(forwarder.port)")), maxConnections: 1)
        let fine = try await grant(client, Self.token("ff"))
        for _ in 0..<5 {
            guard case .delivered = await client.push(Self.randomPush(), grant: try await grant(client, Self.token()))
            else {
                Issue.record("not delivered")
                return
            }
        }
        #expect(forwarder.connections == 1)

        // APNs fails once (relay 502); the helper resends the same push, which is delivered once.
        let before = fixture.simulator.statistics.requests
        fixture.simulator.inject(.status(500, reason: "InternalServerError"))
        let push = Self.randomPush()
        let policy = RetryPolicy(maxAttempts: 3, maxWait: .seconds(5), backoff: .milliseconds(50))
        guard case .delivered = await client.push(push, grant: fine, retrying: policy) else {
            Issue.record("the helper did not deliver after one failure")
            return
        }
        #expect(fixture.simulator.delivered.filter { $0.collapseID == push.id }.count == 1)
        #expect(fixture.simulator.statistics.requests == before + 2)

        // Never resent: a token APNs will never deliver to (one request to APNs, not three).
        let requests = fixture.simulator.statistics.requests
        let gone = try await grant(client, Self.token("410"))
        #expect(await client.push(push, grant: gone, retrying: policy) == .dropRegistration)
        #expect(fixture.simulator.statistics.requests == requests + 1)

        // A phone's limit asks for longer than the policy's longest wait: returned at once.
        _ = await client.push(Self.randomPush(), grant: fine)
        _ = await client.push(Self.randomPush(), grant: fine)
        let started = ContinuousClock.now
        guard case .retry(_, .phoneLimit) = await client.push(push, grant: fine, retrying: policy) else {
            Issue.record("the phone's limit did not answer")
            return
        }
        // Wall-clock: the relay's window is real time; waiting would take the phone's ~60 s.
        #expect(ContinuousClock.now - started < .seconds(10))

        // GOAWAY for every send: resent up to maxAttempts, then the last outcome.
        let refused = try await grant(client, Self.token("60a"))
        let goaways = fixture.simulator.statistics.goawaysSent
        #expect(await client.push(push, grant: refused, retrying: policy) == .failed(mayHaveBeenDelivered: true))
        #expect(fixture.simulator.statistics.goawaysSent > goaways)
    }

    @Test func thePushCommandSaysWhatBecameOfItsPush() async throws {
        let fixture = try Self.makeFixture()
        let url = "http://127.0.0.1:\(fixture.relay.port)"
        let client = RelayClient(relay: try #require(URL(string: url)))
        let fine = try await grant(client, Self.token("ff"))
        let delivered = try CommandRun(["push", "--relay", url, "--grant", fine])
        #expect(delivered.status == 0)
        #expect(delivered.standardOutput.hasPrefix("push: delivered, apns-id "))
        // The relay's HTTP status, as docs/operations/one-host.md says.
        #expect(delivered.standardOutput.contains(" (HTTP 200, "), "\(delivered.standardOutput)")
        #expect(fixture.waitForDeliveries(1).count == 1)
        #expect(!delivered.standardOutput.contains(fine))

        let gone = try await grant(client, Self.token("410"))
        let dropped = try CommandRun(["push", "--relay", url, "--grant", gone])
        #expect(dropped.status == 1)
        #expect(dropped.standardOutput.contains("410 unregistered"))
        #expect(dropped.standardOutput.contains(" (HTTP 410, "), "\(dropped.standardOutput)")
        let nowhere = try CommandRun(["push", "--relay", "http://127.0.0.1:1", "--grant", gone])
        #expect(nowhere.standardOutput.hasPrefix("push: no connection to 127.0.0.1:1: "), "\(nowhere.output)")
        #expect(
            nowhere.standardOutput.contains("; the push never reached the relay (no HTTP answer, "), "\(nowhere.output)"
        )
        #expect(try CommandRun(["push", "--relay", "ftp://x", "--grant", gone]).status == 64)
        #expect(try CommandRun(["push", "--relay", url]).status == 64)
        let help = try CommandRun(["push", "--help"])
        #expect(help.status == 0)
        #expect(help.standardOutput.hasPrefix("usage: duo-relay push --relay URL --grant GRANT"))
    }
}
