import Foundation
import RedisTestSupport
import RelayTestSupport
import Testing

/// deploy/grafana/duo-relay.json against a real Prometheus (Debian's `prometheus`, from `scripts/install-deps
/// --test`): Prometheus, configured from deploy/prometheus/prometheus.example.yml, scrapes a running relay (both
/// APNs environments, a Redis limits store) under a small load that gives every panel something to show
/// (deliveries, grants, a phone and an address over their limits, shed pushes), and every query of every panel,
/// with the dashboard's variables filled as Grafana fills them for "All", returns data through Prometheus' HTTP API.
@Suite(.serialized) struct DashboardQueryTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let dashboard = "deploy/grafana/duo-relay.json"

    /// One query of one panel.
    struct PanelQuery: CustomStringConvertible {
        var panel: String
        var expression: String
        var description: String { "\(panel): \(expression)" }
    }

    /// Every query of every panel (rows' nested panels included), with the dashboard's variables replaced as
    /// Grafana replaces them: `$job` by its value, `$instance` by its "All" value, `$__rate_interval` by the
    /// one minute Grafana gives it for Prometheus' default 15 s scrape interval.
    static func panelQueries() throws -> [PanelQuery] {
        let data = try Data(contentsOf: root.appendingPathComponent(dashboard))
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let variables = try #require((json["templating"] as? [String: Any])?["list"] as? [[String: Any]])
        let names = Set(variables.compactMap { $0["name"] as? String })
        #expect(names == ["datasource", "job", "instance"], "the variables this test fills: \(names)")
        let instance = try #require(variables.first { $0["name"] as? String == "instance" })
        #expect(instance["allValue"] as? String == ".*" && instance["includeAll"] as? Bool == true)
        var panels = try #require(json["panels"] as? [[String: Any]])
        panels += panels.flatMap { $0["panels"] as? [[String: Any]] ?? [] }
        var queries: [PanelQuery] = []
        for panel in panels where panel["type"] as? String != "row" {
            let title = panel["title"] as? String ?? "?"
            let targets = panel["targets"] as? [[String: Any]] ?? []
            #expect(!targets.isEmpty, "panel \(title) has no query")
            for target in targets {
                let expression = try #require(target["expr"] as? String, "panel \(title) has a target without expr")
                let filled = expression.replacingOccurrences(of: "$__rate_interval", with: "1m")
                    .replacingOccurrences(of: "$job", with: "duo-relay")
                    .replacingOccurrences(of: "$instance", with: ".*")
                #expect(
                    !filled.contains("$"), "panel \(title) uses a variable the dashboard does not define: \(filled)")
                queries.append(PanelQuery(panel: title, expression: filled))
            }
        }
        return queries
    }

    @Test("the dashboard shows pushes by answer, APNs latency and state per environment, limits, shedding, TLS expiry")
    func dashboardCoversWhatOperatorsWatch() throws {
        let expressions = try Self.panelQueries().map(\.expression).joined(separator: "\n")
        for needed in [
            #"duo_relay_requests_total{job="duo-relay",instance=~".*",endpoint="push"}"#,
            "duo_relay_apns_latency_seconds_bucket", "by (environment, state) (duo_relay_apns_environment_state",
            "duo_relay_limits_store_state", #"outcome=~"overloaded|rate_limited""#,
            "duo_relay_limiter_rejections_total",
            "duo_relay_tls_certificate_expiry_timestamp_seconds",
        ] {
            #expect(expressions.contains(needed), "no panel queries \(needed)")
        }
    }

    @Test("every panel's every query returns data from Prometheus scraping a relay under load")
    func everyQueryReturnsData() throws {
        try #require(
            Tool.isAvailable(PrometheusProcess.executable),
            "prometheus is missing: run scripts/install-deps --test (Debian package prometheus)")
        let queries = try Self.panelQueries()
        let redis = try RedisServerProcess()
        var secrets = TestSecrets()
        secrets.environments = ["SANDBOX", "PRODUCTION"]
        let store = #"{"kind":"redis","url":"redis://127.0.0.1:\#(redis.port)/0","timeout_ms":1000}"#
        // Small limits, so that a few requests show both limiters; the client's address from X-Forwarded-For, so
        // that one loopback client can be many addresses; two pushes in flight, so that a few slow ones shed.
        let fixture = try PushFixture(
            relayConfig:
                #""ip_limit":{"requests":5,"period_s":10,"block_s":10,"client_ip_header":"X-Forwarded-For"},"#
                + #""push_limit":{"requests":2,"period_s":60},"server":{"max_pushes_in_flight":2},"#
                + #""limits_store":\#(store),"metrics_listen":"127.0.0.1:0""#,
            secrets: secrets, relayEnvironment: ["REDIS_PASSWORD": redis.password])
        let metricsPort = try Self.metricsPort(fixture.relay)
        let prometheus = try PrometheusProcess(scraping: metricsPort, rules: Self.root)
        defer { prometheus.stop() }

        // Once before Prometheus has seen the series and once after: the second load is what rate() sees.
        let load = Load(fixture: fixture)
        try load.round(0)
        try #require(
            Poll.until(within: .seconds(20), every: .milliseconds(200)) {
                (try? prometheus.query(#"duo_relay_requests_total{outcome="overloaded"}"#).isEmpty) == false
            }, "Prometheus never scraped the relay")
        try load.round(1)

        // A query's data: at least one series, with a finite value (histogram_quantile over no increase is NaN).
        func hasData(_ query: PanelQuery) -> Bool {
            guard let samples = try? prometheus.query(query.expression) else { return false }
            return samples.contains { $0.isFinite }
        }
        let servesTLS = fixture.relayConfigText.contains(#""tls""#)
        let tlsQueries = queries.filter { $0.expression.contains("duo_relay_tls_") }
        let others = queries.filter { !$0.expression.contains("duo_relay_tls_") }
        var missing = others
        _ = Poll.until(within: .seconds(30), every: .milliseconds(500)) {
            missing = missing.filter { !hasData($0) }
            return missing.isEmpty
        }
        #expect(missing.isEmpty, "queries without data:\n\(missing.map(\.description).joined(separator: "\n"))")
        #expect(others.count >= 15, "\(others.count) queries")
        #expect(!tlsQueries.isEmpty)
        let exposition = try RawHTTPClient(port: metricsPort).request("GET", "/metrics").text
        for query in tlsQueries {
            if servesTLS {
                #expect(hasData(query), "\(query)")
            } else {
                // This relay serves plain HTTP (no `tls` in its configuration, as behind a front): it exposes no
                // certificate expiry, so the TLS panel's query has nothing to return, and that is the only query
                // allowed to return nothing.
                #expect(!exposition.contains("duo_relay_tls_certificate_expiry_timestamp_seconds{"))
                #expect((try prometheus.query(query.expression)).isEmpty, "\(query)")
            }
        }
    }

    static func metricsPort(_ relay: RelayProcess) throws -> UInt16 {
        let line = try #require(relay.standardError.split(separator: "\n").first { $0.contains("metrics on") })
        return try #require(line.split(separator: ":").last.flatMap { UInt16($0.prefix { $0.isNumber }) })
    }

    /// The requests that give each panel data: deliveries in both environments, a phone and an address over their
    /// limits, and pushes shed while APNs is slow. Each client address is made up (X-Forwarded-For).
    struct Load {
        let fixture: PushFixture

        func grant(environment: String, address: String) throws -> RawHTTPClient.Response {
            try fixture.relay.connect().request(
                "POST", "/v1/grant",
                body: Array(#"{"token":"\#(randomToken())","environment":"\#(environment)"}"#.utf8),
                headers: ["X-Forwarded-For": address])
        }

        func push(_ grant: String, address: String) throws -> RawHTTPClient.Response {
            try fixture.relay.connect().request(
                "POST", "/v1/push", body: PushFixture.pushBody(grant: grant), headers: ["X-Forwarded-For": address])
        }

        func mint(environment: String, address: String) throws -> String {
            let answer = try grant(environment: environment, address: address)
            guard answer.status == 200, let grant = answer.json?["grant"] as? String else {
                throw TestFailure("grant: \(answer.status) \(answer.text)")
            }
            return grant
        }

        func round(_ round: Int) throws {
            for (index, environment) in ["sandbox", "production"].enumerated() {
                let address = "203.0.113.\(round * 2 + index + 1)"
                let grant = try mint(environment: environment, address: address)
                // push_limit is 2 a minute: the third push for the phone is refused.
                let statuses = try (0..<3).map { _ in try push(grant, address: address).status }
                #expect(statuses == [200, 200, 429], "\(environment)")
            }
            // ip_limit is 5 per 10 s: the sixth request from one address is refused.
            let statuses = try (0..<6).map { _ in
                try grant(environment: "sandbox", address: "198.51.100.\(round + 1)").status
            }
            #expect(statuses == [200, 200, 200, 200, 200, 429])
            // Two pushes in flight at most: of six sent at once while APNs takes 300 ms, some are shed (503). A
            // loaded machine may start the threads too far apart; a few tries are allowed.
            var shed = false
            for attempt in 0..<5 where !shed {
                let grants = try (0..<6).map { index in
                    try mint(environment: "sandbox", address: "198.18.\(round * 10 + attempt).\(index + 1)")
                }
                fixture.simulator.setDefaultFault(.delay(.milliseconds(300)))
                let answers = concurrently(6) { index in
                    try push(grants[index], address: "198.18.\(round * 10 + attempt).\(index + 1)").status
                }
                fixture.simulator.setDefaultFault(nil)
                shed = answers.contains { (try? $0.get()) == 503 }
            }
            #expect(shed, "no push was shed")
        }
    }
}
