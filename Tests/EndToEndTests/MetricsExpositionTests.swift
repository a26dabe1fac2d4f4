import Foundation
import RelayTestSupport
import Testing

/// The whole `/metrics` exposition, as Prometheus reads it: valid for `promtool check metrics`, each
/// family in one group even with both environments configured, names that say what they count, and the version.
@Suite struct MetricsExpositionTests {
    /// Relay and simulator with both environments, after a little traffic in each, scraped once.
    /// - Parameter apnsConfig: extra keys of the relay's `apns` section (an egress proxy).
    static func scrapeBothEnvironments(apnsConfig: String = "") throws -> (text: String, fixture: PushFixture) {
        var secrets = TestSecrets()
        secrets.environments = ["SANDBOX", "PRODUCTION"]
        let fixture = try PushFixture(
            relayConfig: ResilienceTests.generousLimits + #","metrics_listen":"127.0.0.1:0""#, apnsConfig: apnsConfig,
            secrets: secrets)
        for environment in ["sandbox", "production"] {
            let grant = try fixture.grant(token: randomToken(), environment: environment)
            #expect(try fixture.push(grant: grant).status == 200)
        }
        #expect(try fixture.push(grant: "garbage").status == 401)
        let line = try #require(fixture.relay.standardError.split(separator: "\n").first { $0.contains("metrics on") })
        let port = try #require(line.split(separator: ":").last.flatMap { UInt16($0.prefix { $0.isNumber }) })
        let response = try RawHTTPClient(port: port).request("GET", "/metrics")
        #expect(response.status == 200)
        return (response.text, fixture)
    }

    /// promtool (Debian's `prometheus` package, from `scripts/install-deps --test`) reads the exposition without
    /// a complaint, lint included.
    @Test func promtoolAcceptsTheWholeExposition() throws {
        let (text, _) = try Self.scrapeBothEnvironments()
        try Self.expectPromtoolAccepts(text)
    }

    /// With an egress proxy, the tunnel failures by kind are one more family, every kind listed per environment.
    @Test func promtoolAcceptsTheExpositionWithAnEgressProxy() throws {
        let proxy = try TinyproxyProcess()
        let (text, _) = try Self.scrapeBothEnvironments(apnsConfig: #""proxy":"http://127.0.0.1:\#(proxy.port)""#)
        try Self.expectPromtoolAccepts(text)
        for environment in ["sandbox", "production"] {
            for kind in ["unreachable", "refused", "malformed", "timeout", "closed"] {
                #expect(
                    text.contains(
                        #"duo_relay_apns_proxy_tunnel_failures_total{environment="\#(environment)",kind="\#(kind)"} 0"#),
                    "\(text)")
            }
        }
    }

    private static func expectPromtoolAccepts(_ text: String) throws {
        let promtool = "/usr/bin/promtool"
        try #require(
            FileManager.default.isExecutableFile(atPath: promtool),
            "promtool is missing: run scripts/install-deps --test (Debian package prometheus)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: promtool)
        process.arguments = ["check", "metrics"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        input.fileHandleForWriting.write(Data(text.utf8))
        try input.fileHandleForWriting.close()
        let report = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "promtool: \(report)\n\(text)")
        #expect(report.isEmpty, "promtool: \(report)")
    }

    /// Every family's HELP, TYPE and samples form one block: no family's lines are split by another's.
    @Test func eachFamilyIsOneGroup() throws {
        let (text, _) = try Self.scrapeBothEnvironments()
        var finished: Set<String> = []
        var current = ""
        for line in text.split(separator: "\n") {
            let family: String
            if line.hasPrefix("# ") {
                family = String(line.split(separator: " ")[2])
            } else {
                let name = String(line.prefix { $0 != "{" && $0 != " " })
                family = ["_bucket", "_sum", "_count"].reduce(name) { name, suffix in
                    name.hasSuffix(suffix) && name.hasPrefix("duo_relay_apns_latency_seconds")
                        ? String(name.dropLast(suffix.count)) : name
                }
            }
            if family != current {
                #expect(!finished.contains(family), "\(family) is split:\n\(text)")
                finished.insert(current)
                current = family
            }
        }
        for environment in ["sandbox", "production"] {
            #expect(text.contains(#"duo_relay_provider_tokens_signed_total{environment="\#(environment)"} 1"#))
            #expect(text.contains(#"duo_relay_apns_connection_attempts_total{environment="\#(environment)"}"#))
            #expect(text.contains(#"duo_relay_apns_connections_failed_total{environment="\#(environment)"} 0"#))
        }
        #expect(!text.contains("duo_relay_apns_connections_opened_total"))
        #expect(!text.contains("duo_relay_apns_proxy_tunnel_failures_total"), "only with an egress proxy")
    }
}
