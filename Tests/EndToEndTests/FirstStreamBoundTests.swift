import APNsSimulator
import Foundation
import RelayTestSupport
import Testing

/// docs/DESIGN.md, "The APNs request": a new APNs connection allows one stream until it has seen a valid token, but a
/// first push that APNs does not answer within about a second does not hold the pushes queued behind it for the rest
/// of its deadline.
@Suite struct FirstStreamBoundTests {
    @Test func aStalledFirstPushDoesNotHoldThePushesBehindIt() throws {
        // One worker with one APNs connection: every push shares the new connection, and the first one stalls.
        let fixture = try PushFixture(
            relayConfig: ResilienceTests.generousLimits + #","server":{"threads":1}"#,
            apnsConfig: #""max_connections":1,"timeout_ms":6000"#)
        let stalledToken = randomToken().lowercased()
        fixture.simulator.setFault(.stall, forDeviceToken: stalledToken)
        let stalledGrant = try fixture.grant(token: stalledToken)
        let grants = try (0..<4).map { _ in try fixture.grant(token: randomToken()) }
        let stalled = try fixture.relay.connect()
        try stalled.send(
            RawHTTPClient.encode("POST", "/v1/push", body: PushFixture.pushBody(grant: stalledGrant), headers: [:]))
        try Poll.wait(for: "the first push stalled at APNs", within: .seconds(10)) {
            fixture.simulator.statistics.requests >= 1
        }
        let started = Date()
        let results = concurrently(grants.count) { index -> (Int, Double) in
            let status = try fixture.push(grant: grants[index]).status
            return (status, Date().timeIntervalSince(started))
        }
        let answers = results.compactMap { try? $0.get() }
        #expect(answers.count == grants.count)
        #expect(answers.allSatisfy { $0.0 == 200 }, "\(answers)")
        // Wall-clock: held for the whole deadline they would take 6 s; the bound is about a second (margin for the
        // loaded machine, far from 6 s).
        #expect(answers.allSatisfy { $0.1 < 3.5 }, "\(answers)")
        #expect(fixture.waitForDeliveries(grants.count).count == grants.count)
        // The stalled push itself is answered at its deadline, with what APNs' silence means.
        let answer = try stalled.readResponse()
        #expect(answer.status == 502)
        #expect(answer.error == "apns")
    }
}
