import Foundation
import RelayCore
import RelayCrypto
import Testing

@Suite struct NotificationTests {
    let settings = NotificationSettings(topic: "app.openduo.pocket", placeholder: "PUSH", expirationSeconds: 86_400)

    @Test func requestMatchesDesign() throws {
        let sealed = Base64.encode([UInt8](repeating: 7, count: 2934))
        let push = PushRequest(
            grant: "g", sealed: sealed, id: String(repeating: "Ab", count: 32),
            thread: String(repeating: "c", count: 64))
        let note = Notification(
            push: push, token: [0xAB, 0x01], settings: settings, expiresAt: settings.expiration(now: 1_000))
        #expect(note.path == "/3/device/ab01")
        #expect(
            note.headers.map(\.name) == [
                "apns-topic", "apns-push-type", "apns-priority", "apns-collapse-id", "apns-expiration",
            ])
        #expect(note.headers.map(\.value) == ["app.openduo.pocket", "alert", "10", push.id, "87400"])
        let text = String(decoding: note.payload, as: UTF8.self)
        #expect(
            text == #"{"aps":{"alert":{"loc-key":"PUSH"},"mutable-content":1,"thread-id":""# + push.thread
                + #""},"sealed":""# + sealed + #""}"#)
        // It is JSON, and it says what the design says.
        let object = try #require(try JSONSerialization.jsonObject(with: Data(note.payload)) as? [String: Any])
        let aps = try #require(object["aps"] as? [String: Any])
        #expect((aps["alert"] as? [String: String])?["loc-key"] == "PUSH")
        #expect(aps["mutable-content"] as? Int == 1)
        #expect(object["sealed"] as? String == sealed)
    }

    @Test func expirationZeroMeansZero() {
        let once = NotificationSettings(topic: "t", placeholder: "P", expirationSeconds: 0)
        #expect(once.expiration(now: 1_000) == 0)
    }

    @Test func largestPayloadFits() {
        let size = Notification.largestPayloadSize(placeholder: "PUSH")
        #expect(size <= Notification.maximumPayloadSize)
        // The payload grows by exactly the placeholder: find where it stops fitting.
        let room = Notification.maximumPayloadSize - size
        #expect(Notification.largestPayloadSize(placeholder: "PUSH" + String(repeating: "x", count: room)) == 4096)
        #expect(Notification.largestPayloadSize(placeholder: "PUSH" + String(repeating: "x", count: room + 1)) == 4097)
    }

    @Test func apnsAnswersMapAsDesigned() {
        func action(_ status: Int, _ reason: String?) -> APNsAnswer.Action {
            APNsAnswer(status: status, reason: reason, apnsID: "x").action(retryAfter: 30)
        }
        #expect(action(200, nil) == .answer(.success("x")))
        #expect(action(410, "Unregistered") == .answer(.failure(.unregistered)))
        #expect(action(410, "ExpiredToken") == .answer(.failure(.unregistered)))
        #expect(action(400, "BadDeviceToken") == .answer(.failure(.unregistered)))
        #expect(action(400, "DeviceTokenNotForTopic") == .answer(.failure(.unregistered)))
        #expect(
            action(429, "TooManyRequests") == .answer(.failure(RelayError(.rateLimited, retryAfter: 30, limit: .apns))))
        #expect(action(429, "TooManyProviderTokenUpdates") == .answer(.failure(.apns)))
        #expect(action(403, "ExpiredProviderToken") == .refreshTokenAndRetry)
        #expect(action(403, "InvalidProviderToken") == .rejectedKey)
        #expect(action(400, "BadCollapseId") == .answer(.failure(.apns)))
        #expect(action(500, "InternalServerError") == .answer(.failure(.apns)))
        #expect(action(503, "ServiceUnavailable") == .answer(.failure(.apns)))
        #expect(
            APNsAnswer(status: 410, apnsID: nil, body: Array(#"{"reason":"Unregistered","timestamp":1}"#.utf8)).reason
                == "Unregistered")
        #expect(APNsAnswer(status: 500, apnsID: nil, body: Array("garbage".utf8)).reason == nil)
    }

    @Test func onlyATokenUpdateRefusedAsTooSoonRetiresItsConnection() {
        func retires(_ status: Int, _ reason: String) -> Bool {
            APNsAnswer.retiresConnection(status: status, body: Array(#"{"reason":"\#(reason)"}"#.utf8))
        }
        #expect(retires(429, "TooManyProviderTokenUpdates"))
        #expect(!retires(429, "TooManyRequests"))
        #expect(!retires(403, "ExpiredProviderToken"))
        #expect(!retires(403, "InvalidProviderToken"))
        #expect(!retires(200, "TooManyProviderTokenUpdates"))
        #expect(!APNsAnswer.retiresConnection(status: 429, body: Array("garbage".utf8)))
    }

    @Test func errorsCarryStatusAndBody() {
        #expect(RelayError.grantExpired.status == 401)
        #expect(RelayError(.overloaded, retryAfter: 1).status == 503)
        #expect(RelayError.tooLarge.body == #"{"error":"too_large"}"#)
    }
}

/// The 502 `apns` detail says which of three it was (docs/DESIGN.md, "POST /v1/push"), in fixed sentences.
@Suite struct APNsFailureDetailTests {
    @Test func aRefusalNamesAPNsReasonAndSaysNotDelivered() throws {
        let answer = APNsAnswer(status: 400, reason: "BadTopic", apnsID: nil)
        guard case .answer(.failure(let error)) = answer.action(retryAfter: 1) else {
            Issue.record("not an answer")
            return
        }
        #expect(error.status == 502)
        #expect(error.body == #"{"error":"apns","detail":"APNs refused the push (BadTopic): it was not delivered"}"#)
        let unknown = RelayError.apnsRefused(reason: "Some\"Thing\u{1}New")
        #expect(unknown.detail == "APNs refused the push: it was not delivered", "APNs' bytes are never repeated")
        #expect(RelayError.apnsRefused(reason: nil).detail == "APNs refused the push: it was not delivered")
        for status in [500, 503] {
            guard
                case .answer(.failure(let error)) = APNsAnswer(status: status, reason: "Shutdown", apnsID: nil)
                    .action(retryAfter: 1)
            else { continue }
            #expect(error.detail == "APNs refused the push (Shutdown): it was not delivered")
        }
    }

    @Test func theThreeKindsAreTellableApart() throws {
        let details = try [
            RelayError.apnsRefused(reason: "TooManyProviderTokenUpdates"), .apnsNotReached, .apnsNoAnswer,
        ].map { try #require($0.detail) }
        let notDelivered = details.map { detail in
            RelayError.notDeliveredDetailPrefixes.contains { detail.hasPrefix($0) }
        }
        #expect(notDelivered == [true, true, false])
        #expect(details[2].contains("may or may not have been delivered"))
        #expect(
            Set([RelayError.apnsNotReached, .apnsNoAnswer, .apnsRefused(reason: "BadTopic")].map(\.code)) == [.apns])
    }
}
