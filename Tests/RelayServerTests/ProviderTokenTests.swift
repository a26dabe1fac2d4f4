import RelayCore
import RelayCrypto
import Testing

/// The provider token's life by the relay's clock (docs/DESIGN.md, "Provider token"): replaced before it is 50 minutes
/// old, never more often than once per 20 minutes, except once after APNs answered ExpiredProviderToken.
@Suite struct ProviderTokenTests {
    let clock = ManualClock()
    let token: ProviderToken

    init() {
        token = ProviderToken(
            credentials: ProviderCredentials(keyID: "KEY1234567", teamID: "TEAM123456", key: P256.Signing.PrivateKey()),
            clock: clock)
    }

    @Test func everyTokenSentIsYoungerThan50MinutesAndNoneReplacedWithin20() throws {
        var signedAt: [String: Double] = [:]
        var elapsed = 0.0
        // A push every 30 seconds for six hours.
        while elapsed <= 6 * 3_600 {
            let current = try token.token()
            if signedAt[current] == nil { signedAt[current] = elapsed }
            #expect(elapsed - signedAt[current]! < 50 * 60)
            clock.advance(seconds: 30)
            elapsed += 30
        }
        let times = signedAt.values.sorted()
        #expect(token.refreshes == times.count)
        #expect(times.count >= 8)
        for (earlier, later) in zip(times, times.dropFirst()) {
            #expect(later - earlier >= 20 * 60)
        }
    }

    @Test func theSameTokenIsSentUntilItsRefreshAge() throws {
        let first = try token.token()
        clock.advance(seconds: Double(ProviderToken.refreshAge / 1_000_000_000) - 1)
        #expect(try token.token() == first)
        clock.advance(seconds: 1)
        #expect(try token.token() != first)
        #expect(token.refreshes == 2)
    }

    /// The `authorization` value is made once per token: it always names the token sent now, also after a refresh
    /// forced by ExpiredProviderToken.
    @Test func theAuthorizationValueIsBearerAndTheTokenSentNow() throws {
        let first = try token.authorization()
        #expect(first.token == (try token.token()))
        #expect(first.header == "bearer " + first.token)
        let forced = try #require(try token.tokenAfterExpiry(of: first.token))
        let second = try token.authorization()
        #expect(second.token == forced)
        #expect(second.header == "bearer " + forced)
        clock.advance(seconds: Double(ProviderToken.refreshAge / 1_000_000_000))
        let third = try token.authorization()
        #expect(third.token != forced)
        #expect(third.header == "bearer " + third.token)
        #expect(token.refreshes == 3)
    }

    @Test func expiredProviderTokenGetsOneNewTokenPer20Minutes() throws {
        let first = try token.token()
        clock.advance(seconds: 60)
        // The exception: a token APNs calls expired is replaced at once, though it is a minute old.
        let second = try #require(try token.tokenAfterExpiry(of: first))
        #expect(second != first)
        // A concurrent push that was refused with the first token retries with the second.
        #expect(try token.tokenAfterExpiry(of: first) == second)
        // APNs calls the new token expired too (a wrong wall clock): no new token within 20 minutes.
        clock.advance(seconds: 19 * 60)
        #expect(try token.tokenAfterExpiry(of: second) == nil)
        #expect(try token.token() == second)
        #expect(token.refreshes == 2)
        clock.advance(seconds: 60)
        let third = try #require(try token.tokenAfterExpiry(of: second))
        #expect(third != second)
        #expect(token.refreshes == 3)
    }
}
