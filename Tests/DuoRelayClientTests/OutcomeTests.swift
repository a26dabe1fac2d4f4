import DuoRelayClient
import Foundation
import Testing

/// The answers of docs/API.md read as outcomes, without a network.
@Suite struct OutcomeTests {
    func answer(_ status: Int, _ body: String = "", retryAfter: String? = nil) -> RelayAnswer {
        RelayAnswer(status: status, retryAfter: retryAfter, body: Data(body.utf8))
    }

    @Test func pushAnswers() {
        #expect(PushOutcome(answer(200, #"{"apns_id":"A-1"}"#)) == .delivered(apnsID: "A-1"))
        #expect(PushOutcome(answer(200, "{}")) == .delivered(apnsID: nil))
        #expect(PushOutcome(answer(410, #"{"error":"unregistered"}"#)) == .dropRegistration)
        #expect(PushOutcome(answer(401, #"{"error":"grant_expired"}"#)) == .renewGrant(expired: true))
        #expect(PushOutcome(answer(401, #"{"error":"grant_invalid"}"#)) == .renewGrant(expired: false))
        #expect(
            PushOutcome(answer(429, #"{"error":"rate_limited","limit":"phone"}"#, retryAfter: "42"))
                == .retry(after: .seconds(42), reason: .phoneLimit))
        #expect(
            PushOutcome(answer(429, #"{"error":"rate_limited","limit":"apns"}"#, retryAfter: "30"))
                == .retry(after: .seconds(30), reason: .apnsLimit))
        #expect(
            PushOutcome(answer(429, #"{"error":"rate_limited","limit":"address"}"#))
                == .retry(after: nil, reason: .addressLimit))
        #expect(
            PushOutcome(answer(503, #"{"error":"overloaded"}"#, retryAfter: "1"))
                == .retry(after: .seconds(1), reason: .overloaded))
        #expect(PushOutcome(answer(502, #"{"error":"apns"}"#)) == .failed(mayHaveBeenDelivered: true))
        #expect(PushOutcome(answer(500, "<html>")) == .failed(mayHaveBeenDelivered: true))
        #expect(
            PushOutcome(answer(400, #"{"error":"bad_request","detail":"id: must be 64 hex characters"}"#))
                == .rejected("id: must be 64 hex characters"))
        #expect(PushOutcome(answer(413, #"{"error":"too_large"}"#)) == .rejected("too_large (HTTP 413)"))
        #expect(PushOutcome(answer(404, "")) == .rejected("HTTP 404"))
    }

    @Test func grantAnswers() throws {
        let granted = GrantOutcome(answer(200, #"{"grant":"AQE","expires_at":"2026-12-30T10:00:00Z"}"#))
        #expect(granted == .granted(grant: "AQE", expiresAt: Date(timeIntervalSince1970: 1_798_624_800)))
        #expect(GrantOutcome(answer(200, "{}")) == .failed)
        #expect(GrantOutcome(answer(400, #"{"error":"environment_unavailable"}"#)) == .environmentUnavailable)
        #expect(
            GrantOutcome(answer(400, #"{"error":"bad_request","detail":"token: must be even-length hex"}"#))
                == .rejected("token: must be even-length hex"))
        #expect(
            GrantOutcome(answer(429, #"{"error":"rate_limited","limit":"address"}"#, retryAfter: "10"))
                == .retry(after: .seconds(10), reason: .addressLimit))
    }

    @Test func retryAfterTakesSecondsOrAnHTTPDate() {
        let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(RetryAfter.parse("120", now: now) == .seconds(120))
        #expect(RetryAfter.parse(" 0 ", now: now) == .seconds(0))
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:50:07 GMT", now: now) == .seconds(30))
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:00:00 GMT", now: now) == .seconds(0))
        #expect(RetryAfter.parse("soon", now: now) == nil)
        #expect(RetryAfter.parse("-5", now: now) == nil)
        #expect(RetryAfter.parse(nil, now: now) == nil)
        #expect(RetryAfter.parse("99999999999999999999", now: now) != nil)
    }

    @Test func theRetryPolicyResendsOnlyWhatIsSafe() {
        let policy = RetryPolicy(maxAttempts: 3, maxWait: .seconds(10), backoff: .milliseconds(100))
        #expect(policy.wait(after: .retry(after: .seconds(2), reason: .apnsLimit), attempt: 1) == .seconds(2))
        #expect(policy.wait(after: .retry(after: nil, reason: .overloaded), attempt: 2) == .milliseconds(200))
        #expect(policy.wait(after: .retry(after: .seconds(45), reason: .phoneLimit), attempt: 1) == nil)
        #expect(policy.wait(after: .failed(mayHaveBeenDelivered: false), attempt: 1) == .milliseconds(100))
        #expect(policy.wait(after: .failed(mayHaveBeenDelivered: true), attempt: 1) == .milliseconds(100))
        #expect(policy.wait(after: .failed(mayHaveBeenDelivered: true), attempt: 3) == nil)
        var cautious = policy
        cautious.resendMaybeDelivered = false
        #expect(cautious.wait(after: .failed(mayHaveBeenDelivered: true), attempt: 1) == nil)
        #expect(cautious.wait(after: .failed(mayHaveBeenDelivered: false), attempt: 1) != nil)
        for final in [
            PushOutcome.delivered(apnsID: nil), .dropRegistration, .renewGrant(expired: true),
            .renewGrant(expired: false), .rejected("x"),
        ] {
            #expect(policy.wait(after: final, attempt: 1) == nil)
        }
    }
}
