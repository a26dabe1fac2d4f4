import APNsSimulator
import Foundation
import Synchronization
import Testing

@Suite("Recording deliveries")
struct RecordingTests {
    @Test("each delivery is appended to the record file as a JSON line and passed to onDeliver")
    func recordFileAndCallback() async throws {
        let seen = Mutex<[DeliveredNotification]>([])
        let fixture = try SimulatorFixture(recordFile: true) { notification in
            seen.withLock { $0.append(notification) }
        }
        let token = try fixture.providerToken()
        let url = fixture.url()
        let (statuses, _) = try await fixture.curlSequence([
            (url, fixture.headers(token: token)), (url, fixture.headers(token: token, extra: ["apns-priority: 5"])),
        ])
        #expect(statuses == [200, 200])
        fixture.simulator.inject(.status(410, reason: "Unregistered"))
        #expect(try await fixture.curl(headers: fixture.headers(token: token)).status == 410)

        let delivered = fixture.simulator.delivered
        #expect(delivered.count == 2)
        #expect(delivered.map(\.stream) == [1, 3])
        #expect(delivered.map(\.priority) == ["10", "5"])
        #expect(seen.withLock { $0 } == delivered)
        let lines = try String(contentsOfFile: fixture.recordPath, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2)
        let decoded = try lines.map { try JSONDecoder().decode(DeliveredNotification.self, from: Data($0.utf8)) }
        #expect(decoded == delivered)
    }
}
