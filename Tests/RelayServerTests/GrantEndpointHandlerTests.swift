import RelayCore
import RelayCrypto
import Testing

@testable import RelayServer

/// `POST /v1/grant` through the handler: what a phone is given, by the relay's clock.
@Suite struct GrantEndpointHandlerTests {
    static let body = Array(#"{"token":"0a1b2c3d","environment":"sandbox"}"#.utf8)

    @Test func aGrantIsIssuedNowAndExpiresAfterTheLifetime() throws {
        let fixture = try RelayHandlerFixture(gateways: [.sandbox]) { $0.grantLifetimeSeconds = 600 }
        let answer = fixture.send("POST", "/v1/grant", body: Self.body)
        #expect(answer.status == 200)
        let expected = Timestamp.iso8601(fixture.clock.unixSeconds + 600)
        #expect(answer.text.contains(#""expires_at":""# + expected + #"""#))
        let text = try #require(answer.text.split(separator: "\"").dropFirst(3).first)
        let grant = try GrantCodec.open(text, keys: fixture.keys, now: fixture.clock.unixSeconds, lifetime: 600)
        #expect(
            grant == Grant(environment: .sandbox, issuedAt: fixture.clock.unixSeconds, token: [0x0a, 0x1b, 0x2c, 0x3d]))
        // An environment without a key gets no grant.
        let production = fixture.send(
            "POST", "/v1/grant", body: Array(#"{"token":"0a1b2c3d","environment":"production"}"#.utf8))
        #expect(production.status == 400)
        #expect(production.error == "environment_unavailable")
    }

    @Test func aGrantTheRelayCannotSealIsItsOwnFault500NotTheClients400() throws {
        // A grant key id the relay holds no key for: sealing fails (the setup's checks never let this run).
        let fixture = try RelayHandlerFixture(gateways: [.sandbox]) { $0.grantKeyID = 7 }
        for _ in 0..<2 {
            let answer = fixture.send("POST", "/v1/grant", body: Self.body)
            #expect(answer.status == 500)
            #expect(answer.error == "internal_error")
        }
        #expect(fixture.handler.metrics.outcomes["internal_error"] == 2)
    }
}
