import APNsSimulator
import Foundation
import RelayTestSupport
import Testing

/// APNs through an egress proxy (docs/DESIGN.md, "Egress proxy"): the real binary, a real tinyproxy started on a loopback
/// port (and a fake proxy for the answers tinyproxy never gives), the simulator behind it.
@Suite(.serialized) struct EgressProxyTests {
    /// The relay's `apns` settings for `proxy`, with a short deadline so that a failed push answers soon.
    static func apns(proxy port: UInt16, timeoutMilliseconds: Int = 2000) -> String {
        #""proxy":"http://127.0.0.1:\#(port)","timeout_ms":\#(timeoutMilliseconds)"#
    }

    /// The metrics listener's port, from the relay's `metrics on` line.
    private func metricsPort(_ relay: RelayProcess) throws -> UInt16 {
        let line = try #require(relay.standardError.split(separator: "\n").first { $0.contains("metrics on") })
        return try #require(line.split(separator: ":").last.flatMap { UInt16($0.prefix { $0.isNumber }) })
    }

    private func metric(_ relay: RelayProcess, _ sample: String) throws -> Int? {
        let text = try RawHTTPClient(port: try metricsPort(relay)).request("GET", "/metrics").text
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(sample + " ") }) else { return nil }
        return Int(line.split(separator: " ").last ?? "")
    }

    @Test func pushesGoThroughTheProxyAndTheRelayHoldsNoConnectionToAPNs() throws {
        let proxy = try TinyproxyProcess()
        let fixture = try PushFixture(
            relayConfig: ResilienceTests.generousLimits, apnsConfig: Self.apns(proxy: proxy.port))
        let grant = try fixture.grant(token: randomToken())
        for _ in 0..<5 { #expect(try fixture.push(grant: grant).status == 200) }
        #expect(fixture.waitForDeliveries(5).count == 5)
        // Every connection the simulator has comes from tinyproxy; the relay's only connection is to the proxy.
        let relayPID = fixture.relay.process.processIdentifier
        let toSimulator = try TinyproxyProcess.processesConnected(to: fixture.simulator.port)
        #expect(!toSimulator.isEmpty && toSimulator.allSatisfy { $0 == proxy.pid }, "\(toSimulator)")
        #expect(!toSimulator.contains(relayPID))
        #expect(try TinyproxyProcess.processesConnected(to: proxy.port).contains(relayPID))
        // The proxy was asked for the simulator by the origin's host, and the summary names the proxy.
        #expect(proxy.log.contains("CONNECT"), "\(proxy.log)")
        #expect(proxy.log.contains("127.0.0.1:\(fixture.simulator.port)"), "\(proxy.log)")
        #expect(
            fixture.relay.standardError.contains(
                "apns proxy: http://127.0.0.1:\(proxy.port) (CONNECT; Proxy-Authorization: none)"))
    }

    @Test func basicCredentialsAreSentAndNeverShown() throws {
        let proxy = try TinyproxyProcess(basicAuth: ("relay", "s3cret-pass"))
        let fixture = try PushFixture(
            relayConfig: ResilienceTests.generousLimits + #","metrics_listen":"127.0.0.1:0""#,
            apnsConfig: Self.apns(proxy: proxy.port),
            relayEnvironment: ["APNS_PROXY_AUTHORIZATION": "relay:s3cret-pass"])
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)
        #expect(
            fixture.relay.standardError.contains(
                "Proxy-Authorization: Basic, from APNS_PROXY_AUTHORIZATION"))
        #expect(
            try metric(
                fixture.relay, #"duo_relay_apns_proxy_tunnel_failures_total{environment="sandbox",kind="refused"}"#)
                == 0)
        for secret in ["s3cret-pass", "cmVsYXk6czNjcmV0LXBhc3M="] {
            #expect(!fixture.relay.allOutput.contains(secret))
        }
    }

    @Test func aWrongCredentialIsOneLineNamingTheProxyAndItsAnswer() throws {
        let proxy = try TinyproxyProcess(basicAuth: ("relay", "s3cret-pass"))
        let fixture = try PushFixture(
            relayConfig: ResilienceTests.generousLimits + #","metrics_listen":"127.0.0.1:0""#,
            apnsConfig: Self.apns(proxy: proxy.port),
            relayEnvironment: ["APNS_PROXY_AUTHORIZATION": "relay:wrong-pass"])
        let grant = try fixture.grant(token: randomToken())
        for _ in 0..<3 {
            let started = ContinuousClock.now
            let response = try fixture.push(grant: grant)
            #expect(response.status == 502)
            #expect(response.error == "apns")
            #expect(ContinuousClock.now - started < .seconds(4), "answered within the push's deadline (2 s)")
        }
        // tinyproxy answers a wrong Basic credential with 401 (not RFC 9110's 407 for proxies).
        let words = "proxy 127.0.0.1:\(proxy.port) refused the tunnel: 401 Unauthorized"
        #expect(fixture.relay.waitForLine(words), "\(fixture.relay.standardError)")
        #expect(fixture.relay.lines(containing: "refused the tunnel").count == 1, "one line, not one per push")
        #expect(fixture.relay.lines(containing: words).first?.hasPrefix("apns sandbox: ") == true)
        #expect(fixture.simulator.statistics.connectionsAccepted == 0)
        let refused = try metric(
            fixture.relay, #"duo_relay_apns_proxy_tunnel_failures_total{environment="sandbox",kind="refused"}"#)
        #expect((refused ?? 0) >= 1)
        for secret in ["wrong-pass", "cmVsYXk6d3JvbmctcGFzcw==", grant] {
            #expect(!fixture.relay.allOutput.contains(secret))
        }
    }

    @Test func aProxyDownThenBackIsOneLineEachAndPushesRecoverByThemselves() throws {
        let proxy = try TinyproxyProcess()
        let fixture = try PushFixture(
            relayConfig: ResilienceTests.generousLimits, apnsConfig: Self.apns(proxy: proxy.port))
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)
        proxy.stop()
        // The open connection goes with the proxy; new ones find nobody at the proxy's port.
        #expect(
            Poll.until(within: .seconds(10), every: .milliseconds(100)) {
                (try? fixture.push(grant: grant))?.status == 502
            })
        // A line for the outage, naming the proxy. Its words are those of the first failure: nobody at the
        // proxy's port, or, when the kill caught a connection the relay was opening through it, that connection's end.
        let proxyName = "proxy 127.0.0.1:\(proxy.port) "
        let downWords = [
            "cannot be reached", "broke the connection before opening the tunnel",
            "closed the connection before opening the tunnel",
        ].map { proxyName + $0 }
        let downLines = {
            fixture.relay.lines(containing: proxyName).filter { line in downWords.contains { line.contains($0) } }
        }
        #expect(
            Poll.until(within: .seconds(10)) { !downLines().isEmpty }, "\(fixture.relay.standardError)")
        let started = ContinuousClock.now
        #expect(try fixture.push(grant: grant).error == "apns")
        #expect(ContinuousClock.now - started < .seconds(4))
        try proxy.restart()
        #expect(
            Poll.until(within: .seconds(20), every: .milliseconds(250)) {
                (try? fixture.push(grant: grant))?.status == 200
            })
        #expect(fixture.relay.waitForLine("resolved: the egress proxy gives no tunnel to APNs"))
        // One line, or, when the first failure was a connection the kill caught, a second naming the cause that
        // lasted (the cause changed: nobody at the proxy's port); never a line per push.
        let down = downLines()
        #expect((1...2).contains(down.count), "\(fixture.relay.lines(containing: "apns "))")
        if down.count == 2 {
            #expect(down[0].contains("connection before opening the tunnel"), "\(down)")
            #expect(down[1].contains(proxyName + "cannot be reached (the cause changed; before: "), "\(down)")
        }
    }

    @Test func aProxyThatAnswersGarbageIsMalformed() throws {
        let fake = try FakeProxy(answer: Array("SSH-2.0-OpenSSH_9.2\r\n".utf8))
        defer { fake.stop() }
        let fixture = try PushFixture(
            relayConfig: ResilienceTests.generousLimits + #","metrics_listen":"127.0.0.1:0""#,
            apnsConfig: Self.apns(proxy: fake.port))
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).error == "apns")
        let words = "proxy 127.0.0.1:\(fake.port) answered CONNECT with no valid HTTP answer"
        #expect(fixture.relay.waitForLine(words), "\(fixture.relay.standardError)")
        #expect(!fixture.relay.standardError.contains("SSH-2.0"), "the proxy's bytes are not repeated")
        let malformed = try metric(
            fixture.relay, #"duo_relay_apns_proxy_tunnel_failures_total{environment="sandbox",kind="malformed"}"#)
        #expect((malformed ?? 0) >= 1)
    }

    @Test func aProxyThatNeverAnswersTimesOutWithinThePushsDeadline() throws {
        let fake = try FakeProxy(answer: nil)
        defer { fake.stop() }
        let fixture = try PushFixture(
            relayConfig: ResilienceTests.generousLimits, apnsConfig: Self.apns(proxy: fake.port))
        let grant = try fixture.grant(token: randomToken())
        let started = ContinuousClock.now
        #expect(try fixture.push(grant: grant).error == "apns")
        #expect(ContinuousClock.now - started < .seconds(4), "answered within the push's deadline (2 s)")
        // The connection's own deadline (5 s) ends the tunnel's wait, in words naming the proxy.
        let words = "proxy 127.0.0.1:\(fake.port) did not answer CONNECT in time"
        #expect(fixture.relay.waitForLine(words, within: .seconds(15)), "\(fixture.relay.standardError)")
    }

    @Test func aTunnelToAServerWithTheWrongCertificateIsATLSProblem() throws {
        let proxy = try TinyproxyProcess()
        let simulator = try PushFixture()
        // The relay trusts a CA that did not sign the simulator's certificate: the tunnel opens, TLS inside it fails.
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let otherCA = directory.appendingPathComponent("other-ca.pem").path
        try SimulatorPKI.generate().caCertificatePEM.write(toFile: otherCA, atomically: true, encoding: .utf8)
        let apns =
            #""sandbox_origin":"https://127.0.0.1:\#(simulator.simulator.port)","ca_file":"\#(otherCA)","#
            + Self.apns(proxy: proxy.port)
        let relay = try RelayProcess(
            config: RelayProcess.config(extra: ResilienceTests.generousLimits, apns: apns), secrets: TestSecrets())
        let connection = try relay.connect()
        let grant = try #require(
            try connection.request(
                "POST", "/v1/grant", body: Array(#"{"token":"\#(randomToken())","environment":"sandbox"}"#.utf8)
            ).json?["grant"] as? String)
        let response = try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: grant))
        #expect(response.status == 502)
        #expect(response.error == "apns")
        #expect(relay.waitForLine("APNs' TLS certificate is not trusted"), "\(relay.standardError)")
        #expect(proxy.log.contains("127.0.0.1:\(simulator.simulator.port)"), "the tunnel itself opened")
        #expect(simulator.simulator.delivered.isEmpty)
    }

    // MARK: check and serve

    private func checkRun(apns: String, environment: [String: String] = [:]) throws -> CommandRun {
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.json").path
        try RelayProcess.config(apns: apns).write(toFile: path, atomically: true, encoding: .utf8)
        return try CommandRun(
            ["check", "--config", path], environment: TestSecrets().environment.merging(environment) { _, new in new })
    }

    @Test(arguments: [
        (#""proxy":"http://user:pw@127.0.0.1:3128""#, "carries credentials"),
        (#""proxy":"https://127.0.0.1:3128""#, "has another scheme"),
        (#""proxy":"socks5://127.0.0.1:1080""#, "has another scheme"),
        (#""proxy":"http://127.0.0.1""#, "has no port"),
        (#""proxy":"http://127.0.0.1:3128/path""#, "without a path"),
        (#""proxy":"127.0.0.1:3128""#, "must be http://host:port"),
    ])
    func checkRefusesABadProxyURLNamingTheKey(apns: String, words: String) throws {
        let run = try checkRun(apns: apns)
        #expect(run.status == 1)
        let line = run.standardError.split(separator: "\n").first { $0.contains("apns.proxy") }
        #expect(line?.contains(words) == true, "\(run.standardError)")
        #expect(!run.output.contains("pw@"))
    }

    @Test func checkNamesTheProxyWithoutCredentials() throws {
        let run = try checkRun(
            apns: #""proxy":"http://proxy.internal:3128""#,
            environment: ["APNS_PROXY_AUTHORIZATION": "relay:s3cret-pass"])
        #expect(run.status == 0, "\(run.output)")
        #expect(
            run.standardOutput.contains(
                "apns proxy: http://proxy.internal:3128 (CONNECT; Proxy-Authorization: Basic, from "
                    + "APNS_PROXY_AUTHORIZATION)"))
        #expect(!run.output.contains("s3cret-pass"))
        #expect(!run.output.contains("HTTPS_PROXY"))
    }

    @Test func checkRefusesAnAuthorizationThatIsNotUserColonPassword() throws {
        let run = try checkRun(
            apns: #""proxy":"http://127.0.0.1:3128""#, environment: ["APNS_PROXY_AUTHORIZATION": "no-colon-secret"])
        #expect(run.status == 1)
        #expect(run.standardError.contains("APNS_PROXY_AUTHORIZATION: must be user:password"))
        #expect(!run.output.contains("no-colon-secret"))
    }

    @Test func anUnusedHTTPSProxyVariableIsSaidOnceByCheckAndServe() throws {
        let unused = "HTTPS_PROXY set in the environment but not used"
        let check = try checkRun(apns: "", environment: ["HTTPS_PROXY": "http://proxy.internal:3128"])
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.components(separatedBy: unused).count == 2, "\(check.output)")
        #expect(check.output.contains("apns.proxy"))
        let lower = try checkRun(apns: "", environment: ["https_proxy": "http://proxy.internal:3128"])
        #expect(lower.output.contains("https_proxy set in the environment but not used"), "\(lower.output)")
        // Set and used: nothing to say.
        let used = try checkRun(
            apns: #""proxy":"http://127.0.0.1:3128""#, environment: ["HTTPS_PROXY": "http://127.0.0.1:3128"])
        #expect(!used.output.contains("not used"))
        let relay = try RelayProcess(
            config: RelayProcess.config(), secrets: TestSecrets(),
            extraEnvironment: ["HTTPS_PROXY": "http://proxy.internal:3128"])
        #expect(relay.standardError.components(separatedBy: unused).count == 2, "\(relay.standardError)")
    }
}
