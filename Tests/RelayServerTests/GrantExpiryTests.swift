import RelayCore
import RelayCrypto
import Testing

@testable import RelayServer

/// Grants live `grant_lifetime_s` from their issue, by the relay's clock.
@Suite struct GrantExpiryTests {
    @Test func aGrantOpensUntilTheSecondItsLifetimeEnds() throws {
        let fixture = try RelayHandlerFixture { $0.grantLifetimeSeconds = 3_600 }
        let grant = try fixture.grant(token: SecureRandom.bytes(count: 32))
        fixture.clock.advance(seconds: 3_599)
        // Opened and past the per-phone limit: only the missing APNs environment stops it.
        let lastSecond = fixture.push(grant: grant)
        #expect(lastSecond.status == 502)
        #expect(lastSecond.error == "apns")
        fixture.clock.advance(seconds: 1)
        let expired = fixture.push(grant: grant)
        #expect(expired.status == 401)
        #expect(expired.error == "grant_expired")
        #expect(fixture.handler.metrics.outcomes["grant_expired"] == 1)
    }

    @Test func theLifetimeIsTheRunningConfigurations() throws {
        let fixture = try RelayHandlerFixture()
        let grant = try fixture.grant(token: SecureRandom.bytes(count: 32))
        // The default lifetime is 30 days.
        fixture.clock.advance(seconds: 29 * 86_400)
        #expect(fixture.push(grant: grant).error == "apns")
        fixture.clock.advance(seconds: 86_400)
        #expect(fixture.push(grant: grant).error == "grant_expired")
    }

    @Test func aGrantFromAnotherRelayIsInvalidNotExpired() throws {
        let fixture = try RelayHandlerFixture()
        let stranger = try GrantCodec.seal(
            Grant(environment: .sandbox, issuedAt: fixture.clock.unixSeconds, token: [1, 2, 3]), keyID: 1,
            keys: RelayKeys([1: SymmetricKey.generate()]))
        let answer = fixture.push(grant: stranger)
        #expect(answer.status == 401)
        #expect(answer.error == "grant_invalid")
    }
}
