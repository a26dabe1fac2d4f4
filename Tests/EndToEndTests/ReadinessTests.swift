import APNsSimulator
import Foundation
import RelayCrypto
import RelayTestSupport
import Testing

/// Readiness is the instance's (docs/DESIGN.md, "Readiness"): one APNs environment failing, with no connection or with its
/// key refused (403), leaves `/readyz` 200 with that environment `failing` in its body, while grants for both
/// environments and the other environment's pushes are served.
@Suite struct ReadinessTests {
    @Test(arguments: ["no-connection", "key-refused"])
    func oneAPNsEnvironmentFailingLeavesTheInstanceReady(_ fault: String) throws {
        var secrets = TestSecrets()
        secrets.environments = ["SANDBOX", "PRODUCTION"]
        // The simulator that stands in for both environments knows only `secrets.keyID`.
        let simulator = try PushFixture(secrets: secrets)
        let origin = "https://127.0.0.1:\(simulator.simulator.port)"
        let apns: String
        var environment: [String: String] = [:]
        switch fault {
        case "no-connection":
            // Port 9 (discard) on loopback: nothing listens, every connect is refused.
            apns =
                #""sandbox_origin":"https://127.0.0.1:9","production_origin":"\#(origin)","#
                + #""ca_file":"\#(TestPKI.shared.caFile)","timeout_ms":2000"#
        default:
            apns =
                #""sandbox_origin":"\#(origin)","production_origin":"\#(origin)","#
                + #""ca_file":"\#(TestPKI.shared.caFile)","timeout_ms":2000"#
            // A key APNs does not know: every sandbox push is answered 403 InvalidProviderToken.
            environment["APNS_KEY_SANDBOX"] = P256.Signing.PrivateKey().pemRepresentation
            environment["APNS_KEY_ID_SANDBOX"] = "UNKNOWNK01"
        }
        let relay = try RelayProcess(
            config: RelayProcess.config(extra: ResilienceTests.generousLimits, apns: apns), secrets: secrets,
            extraEnvironment: environment)
        let connection = try relay.connect()
        func grant(_ environment: String) throws -> String {
            let response = try connection.request(
                "POST", "/v1/grant",
                body: Array(#"{"token":"\#(randomToken())","environment":"\#(environment)"}"#.utf8))
            #expect(response.status == 200, "\(environment): \(response.text)")
            return try #require(response.json?["grant"] as? String)
        }
        func push(_ grant: String) throws -> RawHTTPClient.Response {
            try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: grant))
        }
        let sandbox = try grant("sandbox")
        let failed = try push(sandbox)
        #expect(failed.status == 502)
        #expect(failed.error == "apns")
        let ready = try connection.request("GET", "/readyz")
        #expect(ready.status == 200, "\(ready.text)")
        #expect(ready.json?["status"] as? String == "ready")
        #expect((ready.json?["environments"] as? [String: String])?["sandbox"] == "failing")
        // Grants for both environments are still minted, and the other environment delivers.
        _ = try grant("sandbox")
        let production = try grant("production")
        let before = simulator.simulator.delivered.count
        #expect(try push(production).status == 200)
        #expect(simulator.simulator.delivered.count == before + 1)
        let after = try connection.request("GET", "/readyz")
        #expect(after.status == 200)
        #expect(after.json?["environments"] as? [String: String] == ["sandbox": "failing", "production": "ready"])
        // Still failing: the next sandbox push is answered 502 again.
        #expect(try push(sandbox).status == 502)
        #expect(try connection.request("GET", "/readyz").status == 200)
    }

    /// A stopping relay is not ready: `/readyz` (on the metrics listener, which stays open while the public one
    /// drains) answers 503 `draining` from the moment it stops accepting, while a push it accepted waits for APNs.
    @Test func aDrainingRelayIsNotReady() throws {
        let fixture = try PushFixture(
            relayConfig: ResilienceTests.generousLimits
                + #","metrics_listen":"127.0.0.1:0","server":{"shutdown_grace_s":5}"#)
        let metricsPort = try #require(
            fixture.relay.standardError.split(separator: "\n").first { $0.contains("metrics on") }
                .flatMap { $0.split(separator: ":").last }.flatMap { UInt16($0.prefix { $0.isNumber }) })
        let probe = try RawHTTPClient(port: metricsPort)
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)
        let ready = try probe.request("GET", "/readyz")
        #expect(ready.status == 200)
        #expect(ready.json?["status"] as? String == "ready")
        // A push held at APNs keeps the relay draining (for up to its grace) after the signal.
        fixture.simulator.setDefaultFault(.delay(.seconds(3)))
        let before = fixture.simulator.statistics.requests
        let pusher = try fixture.relay.connect()
        try pusher.send(
            RawHTTPClient.encode("POST", "/v1/push", body: PushFixture.pushBody(grant: grant), headers: [:]))
        try Poll.wait(for: "the push at APNs", within: .seconds(10)) {
            fixture.simulator.statistics.requests > before
        }
        fixture.relay.signal(SIGTERM)
        try Poll.wait(for: "readiness to say draining", within: .seconds(5)) {
            let answer = try? probe.request("GET", "/readyz")
            return answer?.status == 503 && answer?.json?["status"] as? String == "draining"
        }
        #expect(try pusher.readResponse().status == 200)
        #expect(try fixture.relay.waitForExit() == 0)
    }
}
