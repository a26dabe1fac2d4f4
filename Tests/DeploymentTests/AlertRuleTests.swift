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

    /// The page every rule's runbook_url points into: one section per alert, with the commands to run.
    static let runbook = "docs/operations/incidents.md"

    @Test("every rule has a description and a runbook_url that is its own section of the incidents page")
    func everyRuleHasItsRunbook() throws {
        let rules = try Self.ruleBlocks()
        #expect(rules.count == (try Self.alertNames()).count)
        for (alert, block) in rules {
            #expect(block.contains("description: "), "\(alert) has no description")
        }
        let problems = Self.runbookProblems(rules: rules, page: try Repository.text(Self.runbook))
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    @Test("the runbook check fails on a missing anchor, another alert's anchor, another page or no runbook_url")
    func runbookCheckCanFail() {
        let page = "# Incidents\n\n## DuoRelayDown\n\ntext\n\n## DuoRelayShedding\n"
        func rule(_ name: String, _ url: String?) -> (String, String) {
            (name, "- alert: \(name)\n  annotations:\n" + (url.map { "    runbook_url: \($0)\n" } ?? ""))
        }
        #expect(Self.runbookProblems(rules: [rule("DuoRelayDown", Self.runbook + "#duorelaydown")], page: page).isEmpty)
        #expect(
            Self.runbookProblems(rules: [rule("DuoRelayNotReady", Self.runbook + "#duorelaynotready")], page: page)
                .count == 1)
        #expect(
            Self.runbookProblems(rules: [rule("DuoRelayDown", Self.runbook + "#duorelayshedding")], page: page)
                .count == 1)
        #expect(
            Self.runbookProblems(rules: [rule("DuoRelayDown", "OPERATIONS.md#duorelaydown")], page: page)
                .count == 1)
        #expect(Self.runbookProblems(rules: [rule("DuoRelayDown", nil)], page: page).count == 1)
    }

    /// What is wrong with the rules' runbook URLs against `page` (the incidents page's text): each must be
    /// `docs/operations/incidents.md#ANCHOR`, where ANCHOR is the alert's name in lower case (the anchor GitHub and
    /// most Markdown renderers give its heading) and a heading of the page has that anchor.
    static func runbookProblems(rules: [(name: String, block: String)], page: String) -> [String] {
        let anchors = Set(
            page.split(separator: "\n").filter { $0.hasPrefix("#") }.map { heading in
                headingAnchor(String(heading.drop { $0 == "#" }))
            })
        var problems: [String] = []
        for (alert, block) in rules {
            guard let line = block.split(separator: "\n").first(where: { $0.contains("runbook_url: ") }) else {
                problems.append("\(alert) has no runbook_url")
                continue
            }
            let url = line.split(separator: "runbook_url: ", maxSplits: 1).last.map(String.init) ?? ""
            let parts = url.trimmingCharacters(in: .whitespaces).split(separator: "#", maxSplits: 1).map(String.init)
            guard parts.count == 2, parts[0] == runbook else {
                problems.append("\(alert): \(url) is not \(runbook)#ANCHOR")
                continue
            }
            if parts[1] != alert.lowercased() {
                problems.append("\(alert): \(url) is not the alert's own section (#\(alert.lowercased()))")
            }
            if !anchors.contains(parts[1]) { problems.append("\(alert): no heading of \(runbook) has #\(parts[1])") }
        }
        return problems
    }

    /// The anchor a Markdown heading gets (GitHub's rule): lower case, punctuation but hyphens dropped, spaces as
    /// hyphens.
    static func headingAnchor(_ heading: String) -> String {
        String(
            heading.trimmingCharacters(in: .whitespaces).lowercased().compactMap { character -> Character? in
                if character == " " { return "-" }
                return character.isLetter || character.isNumber || character == "-" || character == "_"
                    ? character : nil
            })
    }

    /// Each rule of the rules file: its alert name and its lines up to the next rule.
    static func ruleBlocks() throws -> [(name: String, block: String)] {
        var found: [(name: String, block: String)] = []
        for line in try Repository.text(rules).split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("- alert: ") {
                found.append((String(trimmed.dropFirst("- alert: ".count)), ""))
            } else if !found.isEmpty {
                found[found.count - 1].block += line + "\n"
            }
        }
        return found
    }

    static func alertNames() throws -> [String] {
        try Repository.text(rules).split(separator: "\n").compactMap { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            return trimmed.hasPrefix("- alert: ") ? String(trimmed.dropFirst("- alert: ".count)) : nil
        }
    }
}
