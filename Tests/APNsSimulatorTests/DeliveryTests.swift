import APNsSimulator
import Foundation
import RelayCrypto
import Testing

@Suite("Delivery")
struct DeliveryTests {
    @Test("a valid push is answered 200 with an apns-id and recorded with its fields")
    func validPush() async throws {
        let fixture = try SimulatorFixture()
        let token = try fixture.providerToken()
        let result = try await fixture.curl(
            headers: fixture.headers(token: token, extra: ["apns-collapse-id: thread-1", "apns-expiration: 0"]))
        #expect(result.exitCode == 0)
        #expect(result.status == 200)
        #expect(result.body.isEmpty)
        let apnsID = try #require(result.headers["apns-id"])
        #expect(UUID(uuidString: apnsID) != nil)
        let delivered = fixture.simulator.delivered
        #expect(delivered.count == 1)
        let notification = try #require(delivered.first)
        #expect(notification.apnsID == apnsID)
        #expect(notification.deviceToken == SimulatorFixture.deviceToken)
        #expect(notification.topic == SimulatorFixture.topic)
        #expect(notification.pushType == "alert")
        #expect(notification.priority == "10")
        #expect(notification.collapseID == "thread-1")
        #expect(notification.expiration == "0")
        #expect(notification.payload == SimulatorFixture.payload)
        #expect(notification.keyID == SimulatorFixture.keyID)
        #expect(notification.connection == 1)
        #expect(notification.stream == 1)
        #expect(fixture.simulator.statistics.requests == 1)
        #expect(fixture.simulator.statistics.distinctProviderTokens == 1)
    }

    @Test("only the latest deliveries stay in memory; the record file and the count keep all")
    func retentionIsBounded() async throws {
        let fixture = try SimulatorFixture(recordFile: true, retainedDeliveries: 3)
        let token = try fixture.providerToken()
        var apnsIDs: [String] = []
        for index in 0..<8 {
            let result = try await fixture.curl(
                headers: fixture.headers(token: token, extra: ["apns-collapse-id: push-\(index)"]))
            #expect(result.status == 200)
            apnsIDs.append(try #require(result.headers["apns-id"]))
        }
        #expect(fixture.simulator.delivered.map(\.apnsID) == Array(apnsIDs.suffix(3)))
        // The ids the simulator makes: distinct, version 4 UUIDs (as Apple's are).
        #expect(Set(apnsIDs).count == 8)
        for id in apnsIDs {
            let uuid = try #require(UUID(uuidString: id)).uuid
            #expect(uuid.6 >> 4 == 4 && uuid.8 >> 6 == 2)
        }
        #expect(fixture.simulator.delivered.map(\.collapseID) == ["push-5", "push-6", "push-7"])
        #expect(fixture.simulator.statistics.delivered == 8)
        let lines = try String(contentsOfFile: fixture.recordPath, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 8)
    }
}
