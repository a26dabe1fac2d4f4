import APNsSimulator
import Foundation
import RelayTestSupport
import Testing

/// One push whose token makes APNs answer GOAWAY on every connection it is sent on must not cost
/// the pushes beside it their delivery (docs/DESIGN.md, "Lifecycle").
@Suite(.serialized) struct PoisonousPushTests {
    static let pushes = 150
    static let runs = 20

    @Test func aPushThatDrawsGoawayEveryTimeCostsTheOthersNothing() throws {
        // The metrics listener tells a failure's cause: a refusal at a connection cap is counted there alone.
        let fixture = try PushFixture(
            relayConfig: ResilienceTests.generousLimits + #","metrics_listen":"127.0.0.1:0""#)
        let tokens = (0..<Self.pushes).map { _ in randomToken() }
        let grants = try tokens.map { try fixture.grant(token: $0) }
        #expect(try fixture.push(grant: grants[0]).status == 200)  // both sides are up
        let warmDeliveries = fixture.simulator.statistics.delivered
        var delivered = warmDeliveries
        for run in 0..<Self.runs {
            let poisonous = run % Self.pushes
            fixture.simulator.setFault(.goaway, forDeviceToken: tokens[poisonous])
            let ids = (0..<Self.pushes).map { _ in PushFixture.hex64() }
            let started = Date()
            let responses = concurrently(Self.pushes) { index -> RawHTTPClient.Response in
                try fixture.push(grant: grants[index], id: ids[index])
            }
            let statuses = responses.map { (try? $0.get().status) ?? -1 }
            fixture.simulator.setFault(nil, forDeviceToken: tokens[poisonous])
            print("poisonous push run \(run): \(String(format: "%.2f", Date().timeIntervalSince(started))) s")
            let failed = statuses.enumerated().filter { $0.offset != poisonous && $0.element != 200 }
            let diagnosis = Self.diagnosis(failed.map(\.offset), responses, fixture)
            #expect(
                failed.isEmpty,
                "run \(run): \(failed.count) other pushes failed: \(failed.map(\.element)); \(diagnosis)")
            #expect(statuses[poisonous] == 502, "run \(run): the poisonous push")
            #expect(fixture.simulator.statistics.goawaysSent > run, "run \(run): no GOAWAY sent")
            delivered += Self.pushes - 1
            let records = fixture.waitForDeliveries(delivered, timeoutSeconds: 5)
            #expect(fixture.simulator.statistics.delivered == delivered, "run \(run)")
            // Exactly once each: every id of this run but the poisonous one, once.
            let counts = Dictionary(
                records.suffix(Self.pushes - 1).map { ($0.collapseID ?? "", 1) }, uniquingKeysWith: +)
            let expected = Set(ids.enumerated().filter { $0.offset != poisonous }.map(\.element))
            #expect(
                Set(counts.keys) == expected, "run \(run): \(expected.subtracting(counts.keys).count) not delivered")
            #expect(counts.values.allSatisfy { $0 == 1 }, "run \(run)")
        }
        // The relay says what happened, once per episode, without identifiers.
        let log = fixture.relay.standardError
        let lines = log.split(separator: "\n").filter { $0.contains("GOAWAY") }
        #expect(lines.count == 1, "one line for the whole episode: \(lines)")
        for token in tokens { #expect(!log.contains(token)) }
    }

    /// What the failed pushes were answered (the first three: status, error body) and the relay's counts of client
    /// connections and answers then, to tell a refusal at a connection cap from one of the push path.
    static func diagnosis(
        _ failed: [Int], _ responses: [Result<RawHTTPClient.Response, any Error>], _ fixture: PushFixture
    ) -> String {
        guard !failed.isEmpty else { return "" }
        let answers = failed.prefix(3).map { index in
            switch responses[index] {
            case .success(let response): "\(response.status) \(response.text)"
            case .failure(let error): "\(error)"
            }
        }
        let counts = ((try? fixture.relay.scrapeMetrics()) ?? "").split(separator: "\n").filter {
            $0.hasPrefix("duo_relay_connections_") || $0.hasPrefix("duo_relay_requests_total{endpoint=\"push\"")
        }
        return "answers: \(answers.joined(separator: "; ")); relay: \(counts.joined(separator: ", "))"
    }
}
