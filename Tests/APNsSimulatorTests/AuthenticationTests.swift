import APNsSimulator
import Foundation
import RelayCrypto
import Testing

@Suite("Provider token authentication")
struct AuthenticationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let status: Int
        let reason: String
        /// Builds the authorization header value (nil: no header) for the fixture.
        let authorization: @Sendable (SimulatorFixture) throws -> String?
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "missing authorization", status: 403, reason: "MissingProviderToken") { _ in nil },
        Case(name: "signed by another key", status: 403, reason: "InvalidProviderToken") {
            "bearer " + (try $0.providerToken(key: P256.Signing.PrivateKey()))
        },
        Case(name: "unknown kid", status: 403, reason: "InvalidProviderToken") {
            "bearer " + (try $0.providerToken(keyID: "OTHER12345"))
        },
        Case(name: "wrong iss", status: 403, reason: "InvalidProviderToken") {
            let iat = Int64($0.clock.unixSeconds)
            return "bearer " + (try $0.providerToken(claims: #"{"iss":"OTHERTEAM1","iat":\#(iat)}"#))
        },
        Case(name: "iat as a string", status: 403, reason: "InvalidProviderToken") {
            let iat = Int64($0.clock.unixSeconds)
            return "bearer " + (try $0.providerToken(claims: #"{"iss":"TEAM123456","iat":"\#(iat)"}"#))
        },
        Case(name: "iat missing", status: 403, reason: "InvalidProviderToken") {
            "bearer " + (try $0.providerToken(claims: #"{"iss":"TEAM123456"}"#))
        },
        Case(name: "iat two hours old", status: 403, reason: "ExpiredProviderToken") {
            "bearer " + (try $0.providerToken(issuedAt: Int64($0.clock.unixSeconds) - 7200))
        },
        Case(name: "iat one hour ahead", status: 403, reason: "InvalidProviderToken") {
            "bearer " + (try $0.providerToken(issuedAt: Int64($0.clock.unixSeconds) + 3600))
        },
        Case(name: "not a JWT", status: 403, reason: "InvalidProviderToken") { _ in "bearer not.a.jwt" },
        Case(name: "alg HS256", status: 403, reason: "InvalidProviderToken") { fixture in
            let token = try fixture.providerToken()
            let parts = token.split(separator: ".")
            let header = Base64.urlEncode(Array(#"{"alg":"HS256","kid":"KEY1234567"}"#.utf8))
            return "bearer \(header).\(parts[1]).\(parts[2])"
        },
        Case(name: "not a bearer token", status: 403, reason: "InvalidProviderToken") {
            "basic " + (try $0.providerToken())
        },
    ]

    @Test("a bad provider token is refused", arguments: cases)
    func refused(_ testCase: Case) async throws {
        let fixture = try SimulatorFixture()
        var headers = fixture.headers(token: "unused").filter { !$0.hasPrefix("authorization:") }
        if let authorization = try testCase.authorization(fixture) {
            headers.append("authorization: \(authorization)")
        }
        let result = try await fixture.curl(headers: headers)
        #expect(result.status == testCase.status)
        #expect(try reason(of: result.body) == testCase.reason)
        #expect(result.headers["apns-id"] != nil)
        #expect(fixture.simulator.delivered.isEmpty)
    }

    @Test("a token accepted earlier expires an hour after its iat")
    func expiresWithTheClock() async throws {
        let fixture = try SimulatorFixture()
        let token = try fixture.providerToken()
        #expect(try await fixture.curl(headers: fixture.headers(token: token)).status == 200)
        fixture.clock.advance(seconds: 3599)
        #expect(try await fixture.curl(headers: fixture.headers(token: token)).status == 200)
        fixture.clock.advance(seconds: 2)
        let expired = try await fixture.curl(headers: fixture.headers(token: token))
        #expect(expired.status == 403)
        #expect(try reason(of: expired.body) == "ExpiredProviderToken")
        #expect(fixture.simulator.delivered.count == 2)
    }

    @Test("a connection may change its token only 20 minutes (by iat) after the previous one")
    func tokenUpdates() async throws {
        let fixture = try SimulatorFixture()
        let now = Int64(fixture.clock.unixSeconds)
        let first = try fixture.providerToken(issuedAt: now - 1500)
        let tooSoon = try fixture.providerToken(issuedAt: now - 1400)
        let later = try fixture.providerToken(issuedAt: now - 300)
        let url = fixture.url()
        let (statuses, bodies) = try await fixture.curlSequence([
            (url, fixture.headers(token: first)),
            (url, fixture.headers(token: tooSoon)),
            (url, fixture.headers(token: first)),
            (url, fixture.headers(token: later)),
        ])
        #expect(statuses == [200, 429, 200, 200])
        #expect(try reason(of: bodies[1]) == "TooManyProviderTokenUpdates")
        let statistics = fixture.simulator.statistics
        #expect(statistics.connectionsAccepted == 1)
        #expect(statistics.distinctProviderTokens == 3)
        #expect(fixture.simulator.delivered.count == 3)
    }

    @Test("after 403 ExpiredProviderToken the connection accepts a fresh token at once")
    func refreshAfterExpired() async throws {
        let fixture = try SimulatorFixture()
        let now = Int64(fixture.clock.unixSeconds)
        let first = try fixture.providerToken(issuedAt: now - 120)
        let refreshed = try fixture.providerToken(issuedAt: now)
        fixture.simulator.inject(.status(403, reason: "ExpiredProviderToken"), count: 2)
        let url = fixture.url()
        let (statuses, bodies) = try await fixture.curlSequence([
            (url, fixture.headers(token: first)),
            (url, fixture.headers(token: first)),
            (url, fixture.headers(token: refreshed)),
        ])
        #expect(statuses == [403, 403, 200])
        #expect(try reason(of: bodies[1]) == "ExpiredProviderToken")
        #expect(fixture.simulator.statistics.connectionsAccepted == 1)
    }

    @Test("separate connections may use different tokens")
    func tokensPerConnection() async throws {
        let fixture = try SimulatorFixture()
        let now = Int64(fixture.clock.unixSeconds)
        let first = try await fixture.curl(
            headers: fixture.headers(token: try fixture.providerToken(issuedAt: now - 10)))
        let second = try await fixture.curl(headers: fixture.headers(token: try fixture.providerToken(issuedAt: now)))
        #expect(first.status == 200)
        #expect(second.status == 200)
        #expect(fixture.simulator.statistics.connectionsAccepted == 2)
    }
}
