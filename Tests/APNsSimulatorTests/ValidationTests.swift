import APNsSimulator
import Foundation
import Testing

@Suite("Request validation")
struct ValidationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let status: Int
        let reason: String
        var method = "POST"
        var path: String? = nil
        var removeHeader: String? = nil
        var extraHeaders: [String] = []
        var payload: String? = SimulatorFixture.payload
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "GET", status: 405, reason: "MethodNotAllowed", method: "GET", payload: nil),
        Case(name: "another path", status: 404, reason: "BadPath", path: "/3/devices/abc"),
        Case(name: "no device token", status: 400, reason: "MissingDeviceToken", path: "/3/device/"),
        Case(name: "short device token", status: 400, reason: "BadDeviceToken", path: "/3/device/abcdef"),
        Case(
            name: "non-hex device token", status: 400, reason: "BadDeviceToken",
            path: "/3/device/" + String(repeating: "xyz0", count: 16)),
        Case(
            name: "device token over 200 characters", status: 400, reason: "BadDeviceToken",
            path: "/3/device/" + String(repeating: "ab", count: 101)),
        Case(
            name: "topic not allowed", status: 400, reason: "TopicDisallowed", extraHeaders: ["apns-topic: com.other"]),
        Case(name: "no topic", status: 400, reason: "MissingTopic", removeHeader: "apns-topic"),
        Case(
            name: "apns-topic twice", status: 400, reason: "DuplicateHeaders",
            extraHeaders: ["apns-topic: \(SimulatorFixture.topic)", "apns-topic: \(SimulatorFixture.topic)"]),
        Case(name: "unknown push type", status: 400, reason: "InvalidPushType", extraHeaders: ["apns-push-type: loud"]),
        Case(name: "no push type", status: 400, reason: "InvalidPushType", removeHeader: "apns-push-type"),
        Case(name: "priority 7", status: 400, reason: "BadPriority", extraHeaders: ["apns-priority: 7"]),
        Case(
            name: "collapse id of 65 bytes", status: 400, reason: "BadCollapseId",
            extraHeaders: ["apns-collapse-id: " + String(repeating: "c", count: 65)]),
        Case(
            name: "expiration not an integer", status: 400, reason: "BadExpirationDate",
            extraHeaders: ["apns-expiration: soon"]),
        Case(name: "apns-id not a UUID", status: 400, reason: "BadMessageId", extraHeaders: ["apns-id: 1234"]),
        Case(name: "empty payload", status: 400, reason: "PayloadEmpty", payload: ""),
        Case(name: "payload not JSON", status: 400, reason: "BadPayload", payload: "hello"),
        Case(name: "payload a JSON array", status: 400, reason: "BadPayload", payload: "[1,2]"),
        Case(
            name: "payload of 4097 bytes", status: 413, reason: "PayloadTooLarge",
            payload: jsonObject(ofSize: 4097)),
    ]

    @Test("an invalid request is answered with APNs' status and reason", arguments: cases)
    func rejected(_ testCase: Case) async throws {
        let fixture = try SimulatorFixture()
        var headers = fixture.headers(token: try fixture.providerToken())
        let replaced = Set(
            ([testCase.removeHeader].compactMap { $0 } + testCase.extraHeaders).map(SimulatorFixture.headerName))
        headers = headers.filter { !replaced.contains(SimulatorFixture.headerName($0)) }
        headers += testCase.extraHeaders
        if let removed = testCase.removeHeader { headers.append(removed + ":") }
        let url = fixture.baseURL + (testCase.path ?? "/3/device/\(SimulatorFixture.deviceToken)")
        let result = try await fixture.curl(url, method: testCase.method, headers: headers, payload: testCase.payload)
        #expect(result.status == testCase.status)
        #expect(try reason(of: result.body) == testCase.reason)
        #expect(result.headers["apns-id"].flatMap { UUID(uuidString: $0) } != nil)
        #expect(fixture.simulator.delivered.isEmpty)
        #expect(fixture.simulator.statistics.requests == 1)
    }

    @Test("a payload of exactly 4096 bytes, priority 5 and a given apns-id are accepted")
    func boundaries() async throws {
        let fixture = try SimulatorFixture()
        let apnsID = "8c1c5b5e-6a3e-4d3a-9a51-0f1d1a2b3c4d"
        let payload = jsonObject(ofSize: 4096)
        let headers = fixture.headers(
            token: try fixture.providerToken(),
            extra: ["apns-priority: 5", "apns-id: \(apnsID)", "apns-collapse-id: " + String(repeating: "c", count: 64)])
        let result = try await fixture.curl(headers: headers, payload: payload)
        #expect(result.status == 200)
        #expect(result.headers["apns-id"] == apnsID)
        let notification = try #require(fixture.simulator.delivered.first)
        #expect(notification.apnsID == apnsID)
        #expect(notification.priority == "5")
        #expect(notification.payload == payload)
        #expect(notification.expiration == nil)
    }

    @Test("an error answer echoes the request's apns-id")
    func errorEchoesID() async throws {
        let fixture = try SimulatorFixture()
        let apnsID = "8C1C5B5E-6A3E-4D3A-9A51-0F1D1A2B3C4D"
        let headers = fixture.headers(token: try fixture.providerToken(), extra: ["apns-id: \(apnsID)"])
        let result = try await fixture.curl(fixture.url(token: "abc"), headers: headers)
        #expect(result.status == 400)
        #expect(result.headers["apns-id"] == apnsID)
    }
}
