import APNsSimulator
import Foundation
import RelayTestSupport
import Testing

/// What an operator reads when APNs cannot be reached: one line when the problem starts, one when
/// it ends, never per push and never an identifier (docs/DESIGN.md, "Lifecycle"). Through the real binary.
@Suite(.serialized) struct APNsProblemLogTests {
    /// Sends `count` pushes for one fresh token, each answered `status` (with a deadline in seconds: `502 apns`
    /// within it), and returns the token and its grant.
    private func pushes(
        _ count: Int, relay: RelayProcess, expecting status: Int = 502, within seconds: Double? = nil
    ) throws -> (token: String, grant: String) {
        let token = randomToken()
        let connection = try relay.connect()
        let grant = try #require(
            try connection.request(
                "POST", "/v1/grant", body: Array(#"{"token":"\#(token)","environment":"sandbox"}"#.utf8)
            ).json?["grant"] as? String)
        for _ in 0..<count {
            let start = Date()
            let response = try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: grant))
            #expect(response.status == status)
            if let seconds {
                #expect(response.error == "apns")
                // Wall-clock: a separate relay process and its real-time APNs deadline; generous margin.
                #expect(Date().timeIntervalSince(start) < seconds)
            }
        }
        return (token, grant)
    }

    private func expectNothingIdentifying(_ relay: RelayProcess, _ secrets: [String]) {
        for secret in secrets { #expect(!relay.allOutput.contains(secret)) }
        #expect(!relay.allOutput.lowercased().contains("/3/device/"))
    }

    /// Starts a relay with `apns` settings, sends three pushes (all 502) and returns the one line
    /// that contains `text`, having checked that the output holds nothing identifying.
    private func oneLine(apns: String, containing text: String) throws -> String? {
        let secrets = TestSecrets()
        let relay = try RelayProcess(
            config: RelayProcess.config(extra: ResilienceTests.generousLimits, apns: apns), secrets: secrets)
        let (token, grant) = try pushes(3, relay: relay)
        #expect(relay.waitForLine(text), "\(relay.lines(containing: "apns "))")
        let found = relay.lines(containing: text)
        #expect(found.count == 1, "\(found)")
        expectNothingIdentifying(relay, [token, grant] + secrets.secretStrings)
        return found.first
    }

    /// APNs out of reach three ways, each started once: every push is answered 502 `apns` within its deadline, the
    /// instance stays ready with the environment failing, and the operator reads one line naming the cause (and,
    /// for a closed port, one more when it ends: the relay connects again on its own).
    enum Unreachable: String, CaseIterable, Sendable {
        case wrongCA = "wrong-ca", closedPort = "closed-port", unresolvable
    }

    @Test(arguments: Unreachable.allCases)
    func unreachableAPNsAnswers502AndIsOneLine(_ kind: Unreachable) throws {
        let secrets = TestSecrets()
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // What stays up while the relay runs: the simulator a wrong CA points at, or the one a closed port was.
        var fixture: PushFixture?
        // The relay's `apns` settings, unless it is the closed port's fixture's.
        var apns: String?
        let text: String
        switch kind {
        case .wrongCA:
            let simulator = try PushFixture()
            fixture = simulator
            let otherCA = directory.appendingPathComponent("other-ca.pem").path
            try SimulatorPKI.generate().caCertificatePEM.write(toFile: otherCA, atomically: true, encoding: .utf8)
            apns =
                #""sandbox_origin":"https://127.0.0.1:\#(simulator.simulator.port)","ca_file":"\#(otherCA)","timeout_ms":2000"#
            text = "TLS certificate is not trusted"
        case .closedPort:
            // The simulator's port, closed while the relay starts, opened again later.
            let closed = try PushFixture(
                relayConfig: ResilienceTests.generousLimits, apnsConfig: #""timeout_ms":2000"#, secrets: secrets)
            closed.simulator.stop()
            fixture = closed
            text = "cannot connect to APNs"
        case .unresolvable:
            apns = #""sandbox_origin":"https://apns.nonexistent.invalid","timeout_ms":2000"#
            text = "cannot resolve APNs' host name"
        }
        let relay =
            try apns.map {
                try RelayProcess(
                    config: RelayProcess.config(extra: ResilienceTests.generousLimits, apns: $0), secrets: secrets)
            } ?? #require(fixture).relay
        let (token, grant) = try pushes(3, relay: relay, within: 3.5)
        let connection = try relay.connect()
        // The environment is failing; the instance still serves (its readiness is its own, not APNs').
        let ready = try connection.request("GET", "/readyz")
        #expect(ready.status == 200)
        #expect((ready.json?["environments"] as? [String: String])?["sandbox"] == "failing")

        #expect(relay.waitForLine(text), "\(relay.lines(containing: "apns "))")
        let found = relay.lines(containing: text)
        #expect(found.count == 1, "\(found)")
        switch kind {
        case .wrongCA:
            #expect(found.first?.contains("unable to get local issuer certificate") == true, "\(found)")
        case .closedPort:
            #expect(found.first?.contains("Connection refused") == true, "\(found)")
            let closed = try #require(fixture)
            let simulator = try APNsSimulator(configuration: closed.simulatorConfiguration)
            defer { simulator.stop() }
            // The relay connects again on its own: a push goes through once it has.
            #expect(
                Poll.until(within: .seconds(15), every: .milliseconds(250)) {
                    (try? closed.push(grant: grant).status) == 200
                })
            #expect(relay.waitForLine("resolved: cannot connect to APNs"))
            #expect(relay.lines(containing: "cannot connect to APNs").count == 2)
        case .unresolvable:
            break
        }
        expectNothingIdentifying(relay, [token, grant] + secrets.secretStrings)
        withExtendedLifetime(fixture) {}
    }

    /// A problem whose cause changes while it lasts: nobody at APNs' port, then a server there whose certificate is
    /// not trusted. One line names the new cause and the one before; the end is one line, naming the last cause.
    @Test func aConnectionProblemWhoseCauseChangesGetsALineNamingTheNewCause() throws {
        let fixture = try PushFixture(relayConfig: ResilienceTests.generousLimits, apnsConfig: #""timeout_ms":2000"#)
        fixture.simulator.stop()
        let (token, grant) = try pushes(2, relay: fixture.relay)
        #expect(fixture.relay.waitForLine("cannot connect to APNs: Connection refused"))
        var untrusted = fixture.simulatorConfiguration
        let other = try SimulatorPKI.generate()
        untrusted.certificatePEM = other.certificatePEM
        untrusted.privateKeyPEM = other.privateKeyPEM
        let impostor = try APNsSimulator(configuration: untrusted)
        let changed = "APNs' TLS certificate is not trusted"
        #expect(
            Poll.until(within: .seconds(15), every: .milliseconds(250)) {
                _ = try? fixture.push(grant: grant)
                return !fixture.relay.lines(containing: changed).isEmpty
            })
        impostor.stop()
        let change = fixture.relay.lines(containing: changed)
        #expect(change.count == 1, "\(change)")
        #expect(
            change.first?.contains("(the cause changed; before: cannot connect to APNs: Connection refused)") == true,
            "\(change)")
        let simulator = try APNsSimulator(configuration: fixture.simulatorConfiguration)
        defer { simulator.stop() }
        #expect(
            Poll.until(within: .seconds(15), every: .milliseconds(250)) {
                (try? fixture.push(grant: grant).status) == 200
            })
        #expect(fixture.relay.waitForLine("resolved: \(changed)"))
        // Three lines in all: the start, the change, the end; none per push. The simulator's stop can meet the
        // relay's first connection half way (its handshake reset by the stopping server): that is a cause of its
        // own, so the refusal after it is a change, and there is one line more.
        let lines = fixture.relay.lines(containing: "apns sandbox: ")
        let resetFirst = lines.first?.contains("the TLS handshake with APNs fails") == true
        if resetFirst {
            #expect(
                lines.dropFirst().first?.contains(
                    "cannot connect to APNs: Connection refused (the cause changed; before: the TLS handshake") == true,
                "\(lines)")
        }
        #expect(lines.count == (resetFirst ? 4 : 3), "\(fixture.relay.lines(containing: "apns "))")
        expectNothingIdentifying(fixture.relay, [token, grant] + fixture.secrets.secretStrings)
    }

    @Test func aServerWithoutHTTP2IsOneLine() throws {
        // openssl s_server offers no ALPN protocol: the handshake works, h2 is not agreed.
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let pki = try SimulatorPKI.generate()
        let certificate = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        let ca = directory.appendingPathComponent("ca.pem").path
        try pki.certificatePEM.write(toFile: certificate, atomically: true, encoding: .utf8)
        try pki.privateKeyPEM.write(toFile: key, atomically: true, encoding: .utf8)
        try pki.caCertificatePEM.write(toFile: ca, atomically: true, encoding: .utf8)
        var server = Process()
        var port: UInt16 = 0
        // A free port, and s_server listening on it (it exits when the port is taken).
        for _ in 0..<5 where port == 0 {
            let candidate = UInt16.random(in: 20_000...40_000)
            server = Process()
            server.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            server.arguments = [
                "s_server", "-accept", "127.0.0.1:\(candidate)", "-cert", certificate, "-key", key, "-quiet",
                "-naccept", "50",
            ]
            server.standardInput = Pipe()
            server.standardOutput = FileHandle.nullDevice
            server.standardError = FileHandle.nullDevice
            try server.run()
            let accepting = Poll.until(within: .seconds(10), every: .milliseconds(50)) {
                server.isRunning && (try? RawHTTPClient(port: candidate, timeoutSeconds: 1)) != nil
            }
            if accepting { port = candidate }
            // SIGKILL: the child inherits the test thread's blocked signals, SIGTERM included (terminate() left
            // s_server running after the test).
            if port == 0 { kill(server.processIdentifier, SIGKILL) }
        }
        try #require(port != 0, "openssl s_server did not start")
        defer { kill(server.processIdentifier, SIGKILL) }
        _ = try oneLine(
            apns: #""sandbox_origin":"https://127.0.0.1:\#(port)","ca_file":"\#(ca)","timeout_ms":2000"#,
            containing: "does not agree to HTTP/2")
    }

    @Test func aGoawayIsOneLineWithItsReason() throws {
        let fixture = try PushFixture(
            relayConfig: ResilienceTests.generousLimits, goawayReason: "BadCertificateEnvironment")
        let token = randomToken()
        let grant = try fixture.grant(token: token)
        #expect(try fixture.push(grant: grant).status == 200)
        fixture.simulator.setDefaultFault(.goaway)
        for _ in 0..<3 { #expect(try fixture.push(grant: grant).status == 502) }
        #expect(fixture.simulator.statistics.goawaysSent >= 3)
        #expect(fixture.relay.waitForLine("GOAWAY"))
        let found = fixture.relay.lines(containing: "GOAWAY")
        #expect(found.count == 1, "\(found)")
        #expect(found.first?.contains("BadCertificateEnvironment") == true)
        expectNothingIdentifying(fixture.relay, [token, grant] + fixture.secrets.secretStrings)
    }
}
