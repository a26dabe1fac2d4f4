import APNsSimulator
import Foundation
import HTTP2Client
import RelayTestSupport
import Testing

/// A push whose token makes the server answer GOAWAY on every connection costs the pushes beside
/// it nothing: the relay's client against the simulator, without the relay around it.
@Suite("One poisonous push among many") struct PoisonousPushClientTests {
    @Test func everyOtherPushIsDeliveredExactlyOnce() async throws {
        let simulator = try SimulatorFixture()
        let apns = try APNsClientFixture(simulator: simulator)
        defer { apns.client.shutdown() }
        #expect(try await apns.push().get().status == 200)
        var delivered = 1
        for run in 0..<6 {
            let tokens = (0..<150).map { _ in randomToken() }
            let poisonous = (run * 37) % 150
            simulator.simulator.setFault(.goaway, forDeviceToken: tokens[poisonous])
            let goawaysBefore = simulator.simulator.statistics.goawaysSent
            let results = await apns.burst(150, tokens: tokens, spread: .milliseconds(run % 2 == 0 ? 0 : 100))
            #expect(simulator.simulator.statistics.goawaysSent > goawaysBefore, "run \(run): the simulator sent GOAWAY")
            var failures: [String] = []
            for (index, result) in results.enumerated() where index != poisonous {
                switch result.result {
                case .success(let response) where response.status == 200: break
                case .success(let response): failures.append("\(response.status)")
                case .failure(let error): failures.append("\(error)")
                }
            }
            #expect(failures.isEmpty, "run \(run): \(failures.count) failed: \(Set(failures))")
            #expect((try? results[poisonous].result.get()) == nil, "run \(run): the poisonous push")
            #expect(simulator.simulator.statistics.goawaysSent > run, "run \(run): no GOAWAY sent")
            delivered += 149
            await Poll.suspendUntil(within: .seconds(5)) { simulator.simulator.statistics.delivered >= delivered }
            let ids = simulator.simulator.delivered.suffix(149).compactMap(\.collapseID)
            #expect(simulator.simulator.statistics.delivered == delivered, "run \(run)")
            #expect(Set(ids).count == 149, "run \(run): each delivered once")
        }
    }
}
