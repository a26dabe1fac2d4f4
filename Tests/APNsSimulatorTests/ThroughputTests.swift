import APNsSimulator
import Foundation
import Testing

@Suite("Throughput", .serialized)
struct ThroughputTests {
    /// h2load opens all its streams at once, before it can see the simulator's first SETTINGS, so the
    /// single-stream rule for new connections would refuse some of them: the benchmark lifts it.
    @Test(
        "h2load: every push succeeds over multiplexed connections",
        arguments: [(requests: 20000, clients: 1, streams: 100), (requests: 20000, clients: 4, streams: 25)])
    func h2load(requests: Int, clients: Int, streams: Int) async throws {
        let fixture = try SimulatorFixture(initialMaxConcurrentStreams: 1000, retainedDeliveries: requests)
        let token = try fixture.providerToken()
        let payloadFile = try fixture.writeFile("payload.json", SimulatorFixture.payload)
        var arguments = ["-n", String(requests), "-c", String(clients), "-m", String(streams), "-d", payloadFile]
        for header in fixture.headers(token: token) { arguments += ["-H", header] }
        arguments.append(fixture.url())
        let result = try await fixture.run("/usr/bin/h2load", arguments)
        let summary = result.stdout.split(whereSeparator: \.isNewline).filter {
            $0.hasPrefix("finished in") || $0.hasPrefix("requests:")
        }
        print("h2load -c \(clients) -m \(streams):", summary.joined(separator: "; "))
        #expect(result.exitCode == 0)
        #expect(result.stdout.contains("\(requests) succeeded"))
        #expect(fixture.simulator.delivered.count == requests)
        let statistics = fixture.simulator.statistics
        #expect(statistics.requests == requests)
        #expect(statistics.delivered == requests)
        #expect(statistics.connectionsAccepted == clients)
        #expect(statistics.maxConcurrentStreamsSeen > 1)
        #expect(statistics.maxConcurrentStreamsSeen <= streams)
        #expect(Set(fixture.simulator.delivered.map(\.connection)).count == clients)
    }
}
