import APNsSimulator
import Foundation
import RelayTestSupport
import Testing

/// Over the wire: every 400 says which field or rule, every 429 which limit (docs/DESIGN.md, "HTTP API").
@Suite struct ErrorDetailEndToEndTests {
    @Test func badRequestsNameTheFieldAndTooLargeTheLimit() throws {
        let fixture = try PushFixture()
        let connection = try fixture.relay.connect()
        let token = randomToken()
        let grant = try fixture.grant(token: token, on: connection)

        let shortSealed = try connection.request(
            "POST", "/v1/push", body: PushFixture.pushBody(grant: grant, sealed: "AAAA"))
        #expect(shortSealed.status == 400)
        #expect(shortSealed.error == "bad_request")
        #expect(shortSealed.json?["detail"] as? String == "sealed: must be standard base64 of exactly 2934 bytes")
        #expect(shortSealed.headers["content-type"] == "application/json")

        let badID = "Z" + String(PushFixture.hex64().dropFirst())
        let wrongID = try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: grant, id: badID))
        #expect(wrongID.json?["detail"] as? String == "id: must be 64 hex characters")
        #expect(!wrongID.text.contains(badID) && !wrongID.text.contains(grant))

        let environment = try connection.request(
            "POST", "/v1/grant", body: Array(#"{"token":"\#(token)","environment":"Sandbox"}"#.utf8))
        #expect(environment.status == 400)
        #expect(environment.json?["detail"] as? String == #"environment: must be "sandbox" or "production""#)
        #expect(!environment.text.contains(token))

        let twice = try connection.request(
            "POST", "/v1/grant", body: Array(#"{"token":"ab","token":"cd","environment":"sandbox"}"#.utf8))
        #expect(twice.json?["detail"] as? String == "token: given more than once")
        // Any member given twice is refused, one the relay does not read too, without repeating its name.
        let unknownTwice = try connection.request(
            "POST", "/v1/grant",
            body: Array(#"{"token":"\#(token)","environment":"sandbox","colour":1,"colour":2}"#.utf8))
        #expect(unknownTwice.status == 400)
        #expect(unknownTwice.error == "bad_request")
        #expect(unknownTwice.json?["detail"] as? String == "body: a member is given more than once")
        #expect(!unknownTwice.text.contains("colour") && !unknownTwice.text.contains(token))
        let pushTwice = try connection.request(
            "POST", "/v1/push",
            body: Array(String(decoding: PushFixture.pushBody(grant: grant), as: UTF8.self).dropLast().utf8)
                + Array(#","v":1,"v":1}"#.utf8))
        #expect(pushTwice.status == 400)
        #expect(pushTwice.json?["detail"] as? String == "body: a member is given more than once")
        #expect(fixture.simulator.delivered.isEmpty)

        let tooLarge = try fixture.relay.connect().request(
            "POST", "/v1/grant", body: [UInt8](repeating: UInt8(ascii: " "), count: 4096))
        #expect(tooLarge.status == 413)
        #expect(tooLarge.error == "too_large")
        #expect(tooLarge.json?["detail"] as? String == "body: larger than 2048 bytes, the limit of /v1/grant")

        let invalid = try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: "AQE" + grant))
        #expect(invalid.status == 401)
        #expect(invalid.error == "grant_invalid")
        #expect(invalid.json?["detail"] is String)
        #expect(invalid.json?["limit"] == nil)
    }

    @Test func eachLimitSaysItsName() throws {
        let fixture = try PushFixture(
            relayConfig:
                #""ip_limit":{"requests":6,"period_s":60,"block_s":60},"push_limit":{"requests":1,"period_s":60}"#
        )
        let connection = try fixture.relay.connect()
        let grant = try fixture.grant(token: randomToken(), on: connection)  // 1 of 6
        #expect(try fixture.push(grant: grant, on: connection).status == 200)  // 2

        let phone = try fixture.push(grant: grant, on: connection)  // 3
        #expect(phone.status == 429)
        #expect(phone.json?["limit"] as? String == "phone")
        #expect(Int(phone.headers["retry-after"] ?? "") ?? 0 > 0)

        fixture.simulator.inject(.status(429, reason: "TooManyRequests"))
        let other = try fixture.grant(token: randomToken(), on: connection)  // 4
        let apns = try fixture.push(grant: other, on: connection)  // 5
        #expect(apns.status == 429)
        #expect(apns.json?["limit"] as? String == "apns")
        #expect(Int(apns.headers["retry-after"] ?? "") ?? 0 > 0)

        _ = try fixture.push(grant: other, on: connection)  // 6: the phone's limit
        let address = try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: other))  // 7
        #expect(address.status == 429)
        #expect(address.json?["limit"] as? String == "address")
        #expect(Int(address.headers["retry-after"] ?? "") ?? 0 > 0)
    }
}
