import RelayCore
import RelayCrypto
import Testing

@testable import RelayServer

/// The per-phone and per-address windows, by the relay's monotonic clock.
@Suite struct LimitWindowTests {
    @Test func aPhonesWindowCountsEveryGrantOfItsTokenAndOpensAgainAfterItsPeriod() throws {
        let fixture = try RelayHandlerFixture {
            $0.pushLimit = LimitPolicy(requests: 3, periodSeconds: 60)
            $0.ipLimit = LimitPolicy(requests: 1_000, periodSeconds: 10)
        }
        let token = SecureRandom.bytes(count: 32)
        let first = try fixture.grant(token: token)
        fixture.clock.advance(seconds: 1)
        let second = try fixture.grant(token: token)
        #expect(first != second)
        for grant in [first, second, first] {
            #expect(fixture.push(grant: grant).error == "apns")
        }
        let limited = fixture.push(grant: second)
        #expect(limited.status == 429)
        #expect(limited.error == "rate_limited")
        #expect(limited.text.contains(#""limit":"phone""#))
        let retryAfter = try #require(Int(limited.header("retry-after") ?? ""))
        #expect((1...60).contains(retryAfter))
        // Another phone is not limited by this one.
        #expect(fixture.push(grant: try fixture.grant(token: SecureRandom.bytes(count: 32))).error == "apns")
        // Still limited a second before the wait it was told; admitted once it has passed.
        fixture.clock.advance(seconds: Double(retryAfter) - 1)
        #expect(fixture.push(grant: first).error == "rate_limited")
        fixture.clock.advance(seconds: 1)
        #expect(fixture.push(grant: first).error == "apns")
    }

    @Test func anAddressOverItsLimitIsBlockedForBlockSecondsOnEveryEndpoint() throws {
        let fixture = try RelayHandlerFixture {
            $0.ipLimit = LimitPolicy(requests: 2, periodSeconds: 10, blockSeconds: 30)
        }
        let grant = try fixture.grant(token: SecureRandom.bytes(count: 32))
        #expect(fixture.push(grant: grant).error == "apns")
        #expect(fixture.send("GET", "/v1/push").status == 405)
        let blocked = fixture.send("POST", "/v1/grant", body: Array("{}".utf8))
        #expect(blocked.status == 429)
        #expect(blocked.text.contains(#""limit":"address""#))
        // Other addresses are counted apart.
        #expect(fixture.push(grant: grant, from: "198.51.100.1").error == "apns")
        // The window (10 s) has passed, the block (30 s) has not.
        fixture.clock.advance(seconds: 15)
        #expect(fixture.push(grant: grant).error == "rate_limited")
        fixture.clock.advance(seconds: 16)
        #expect(fixture.push(grant: grant).error == "apns")
        // Health checks are never counted.
        for _ in 0..<5 { #expect(fixture.send("GET", "/healthz").status == 200) }
        #expect(fixture.push(grant: grant).error == "apns")
    }
}
