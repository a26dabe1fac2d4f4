import HTTPServer
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

    /// The socket peer's key is worked out once per connection and kept with it: the kept key must be the one the
    /// address gets anywhere else, on another connection or named by a trusted proxy (worked out per request).
    @Test func theRequestsOfOneConnectionCountWithTheirAddressesOtherRequests() throws {
        let fixture = try RelayHandlerFixture {
            $0.ipLimit = LimitPolicy(requests: 4, periodSeconds: 10)
            $0.clientIPHeader = "x-forwarded-for"
        }
        let grant = try fixture.grant(token: SecureRandom.bytes(count: 32))
        let kept = PeerMemo()
        let viaProxy = [(name: "X-Forwarded-For", value: "192.0.2.7")]
        #expect(fixture.push(grant: grant, from: "192.0.2.7", connection: kept).error == "apns")
        #expect(fixture.push(grant: grant, from: "127.0.0.1", headers: viaProxy).error == "apns")
        #expect(fixture.push(grant: grant, from: "192.0.2.7", connection: kept).error == "apns")
        #expect(fixture.push(grant: grant, from: "192.0.2.7").error == "apns")
        // The fifth request of the address is refused on its kept connection, on a new one, and through the proxy.
        let refused = fixture.push(grant: grant, from: "192.0.2.7", connection: kept)
        #expect(refused.error == "rate_limited")
        #expect(refused.text.contains(#""limit":"address""#))
        #expect(fixture.push(grant: grant, from: "192.0.2.7").error == "rate_limited")
        #expect(fixture.push(grant: grant, from: "127.0.0.1", headers: viaProxy).error == "rate_limited")
        // Another address on its own connection is counted apart.
        #expect(fixture.push(grant: grant, from: "198.51.100.1").error == "apns")
    }

    /// Behind a trusted proxy, one connection carries many clients: each request is counted against the address its
    /// header names, never against a key kept for the connection; a request without the header counts against the
    /// proxy itself.
    @Test func aProxysConnectionCountsEachClientItCarriesApart() throws {
        let fixture = try RelayHandlerFixture {
            $0.ipLimit = LimitPolicy(requests: 1, periodSeconds: 10)
            $0.clientIPHeader = "x-forwarded-for"
        }
        let grant = try fixture.grant(token: SecureRandom.bytes(count: 32))
        let proxy = PeerMemo()
        func push(for client: String?) -> String? {
            fixture.push(
                grant: grant, from: "127.0.0.1", headers: client.map { [("X-Forwarded-For", $0)] } ?? [],
                connection: proxy
            ).error
        }
        #expect(push(for: nil) == "apns")
        #expect(push(for: "198.51.100.1") == "apns")
        #expect(push(for: "198.51.100.2") == "apns")
        #expect(push(for: "198.51.100.1") == "rate_limited")
        #expect(push(for: nil) == "rate_limited")
        #expect(push(for: "198.51.100.3") == "apns")
    }
}
