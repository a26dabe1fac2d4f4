import Foundation
import Testing

/// `duo-relay dev`, the README's run command: what it prints works.
@Suite struct DevCommandTests {
    @Test func printedStepsDeliverANotificationTheSimulatorShows() throws {
        let dev = try RelayProcess(arguments: ["dev", "--port", "0"], environment: [:])
        let deadline = Date().addingTimeInterval(30)
        var port: UInt16?
        while port == nil && Date() < deadline {
            if let range = dev.standardOutput.range(of: "relay on http://127.0.0.1:") {
                port = UInt16(dev.standardOutput[range.upperBound...].prefix { $0.isNumber })
            }
            usleep(20_000)
        }
        let relayPort = try #require(port)
        let output = dev.standardOutput
        #expect(output.contains("curl -s http://127.0.0.1:\(relayPort)/v1/grant"))
        #expect(output.contains("/v1/push"))

        // Follow the printed steps (with this test's own HTTP client instead of curl).
        let connection = try TestConnection(port: relayPort)
        let token = String(repeating: "ab", count: 32)
        let grantResponse = try connection.request(
            "POST", "/v1/grant", body: Array(#"{"token":"\#(token)","environment":"sandbox"}"#.utf8))
        let grant = try #require(grantResponse.json?["grant"] as? String)
        let push = try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: grant))
        #expect(push.status == 200)
        let apnsID = try #require(push.json?["apns_id"] as? String)
        while !dev.standardOutput.contains("delivered \(apnsID)") && Date() < deadline { usleep(20_000) }
        #expect(dev.standardOutput.contains("apns-sim: delivered \(apnsID) to device abababab"))
        dev.signal(SIGINT)
        #expect(try dev.waitForExit() == 0)
        // The relay itself printed nothing about the request.
        #expect(!dev.standardError.contains(token))
        #expect(!dev.standardError.contains(grant))
    }
}
