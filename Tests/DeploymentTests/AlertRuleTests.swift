import Foundation
import RelayTestSupport
import Testing

/// deploy/prometheus: the alerting rules, checked and unit-tested by Prometheus' own `promtool`
/// (Debian's prometheus package, from `scripts/install-deps --test`).
@Suite struct AlertRuleTests {
    static let promtool = "/usr/bin/promtool"
    static let folder = "deploy/prometheus"
    static let rules = "deploy/prometheus/alerts.rules.yml"
    static let tests = "deploy/prometheus/alerts.test.yml"

    @Test("promtool check rules accepts every rule", .enabled(if: Tool.isAvailable(promtool)))
    func rulesCheck() throws {
        let result = try Tool.run(Self.promtool, ["check", "rules", Repository.url(Self.rules).path])
        #expect(result.status == 0, "\(result.output) \(result.errors)")
        let alerts = try Self.alertNames()
        #expect(alerts.count >= 9, "alerts found: \(alerts)")
        #expect(result.output.contains("SUCCESS: \(alerts.count) rules found"), "\(result.output)")
    }

    @Test(
        "promtool test rules: each alert fires on the series that mean trouble",
        .enabled(if: Tool.isAvailable(promtool)))
    func rulesUnitTests() throws {
        let result = try Tool.run(
            Self.promtool, ["test", "rules", "alerts.test.yml"], in: Repository.url(Self.folder))
        #expect(result.status == 0, "\(result.output) \(result.errors)")
        #expect(result.output.contains("SUCCESS"), "\(result.output)")
    }

    @Test(
        "promtool test rules fails when a rule's threshold moves, so the test above can fail",
        .enabled(if: Tool.isAvailable(promtool)))
    func rulesUnitTestsCanFail() throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let rules = try Repository.text(Self.rules)
        #expect(rules.contains("> 0.05"))
        _ = try scratch.write(rules.replacingOccurrences(of: "> 0.05", with: "> 0.5"), to: "alerts.rules.yml")
        _ = try scratch.write(try Repository.text(Self.tests), to: "alerts.test.yml")
        let result = try Tool.run(Self.promtool, ["test", "rules", "alerts.test.yml"], in: scratch.url)
        #expect(result.status != 0)
        #expect((result.output + result.errors).contains("DuoRelayPushFailingAtAPNs"))
    }

    @Test(
        "promtool check config accepts the host's scrape example, with the rules it loads",
        .enabled(if: Tool.isAvailable(promtool)))
    func scrapeExampleChecks() throws {
        let result = try Tool.run(
            Self.promtool, ["check", "config", "prometheus.example.yml"], in: Repository.url(Self.folder))
        #expect(result.status == 0, "\(result.output) \(result.errors)")
        #expect(result.output.contains("SUCCESS: 1 rule files found"), "\(result.output)")
    }

    @Test("every alert is tested both firing and silent")
    func everyAlertIsTested() throws {
        let tests = try Repository.text(Self.tests).split(separator: "\n").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        for alert in try Self.alertNames() {
            var firing = 0
            var silent = 0
            for (index, line) in tests.enumerated() where line == "alertname: \(alert)" {
                let next = index + 1 < tests.count ? tests[index + 1] : ""
                if next == "exp_alerts: []" { silent += 1 } else if next == "exp_alerts:" { firing += 1 }
            }
            #expect(firing > 0, "\(alert) is never shown firing")
            #expect(silent > 0, "\(alert) is never shown silent")
        }
    }

    @Test("the rules read only the relay's metrics (and up), and every one carries a severity and a summary")
    func rulesReadTheRelaysMetrics() throws {
        let rules = try Repository.text(Self.rules)
        let operations = try Documentation.operationsDocuments().map(\.text).joined(separator: "\n")
        for match in rules.matches(of: try Regex("[a-z_]+_total|duo_relay_[a-z_]+")) {
            let name = String(rules[match.range])
            #expect(name.hasPrefix("duo_relay_"), "\(name) is not a duo-relay metric")
        }
        let alerts = try Self.alertNames()
        #expect(rules.components(separatedBy: "severity: ").count - 1 == alerts.count)
        #expect(rules.components(separatedBy: "summary: ").count - 1 == alerts.count)
        // The operations documents name each alert, so that whoever is paged finds what it means.
        for alert in alerts { #expect(operations.contains(alert), "no operations document names \(alert)") }
    }

    static func alertNames() throws -> [String] {
        try Repository.text(rules).split(separator: "\n").compactMap { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            return trimmed.hasPrefix("- alert: ") ? String(trimmed.dropFirst("- alert: ".count)) : nil
        }
    }
}
