import APNsSimulator
import Foundation
import Testing

@Suite("Faults by device token prefix")
struct TokenFaultTests {
    @Test(
        "PREFIX=OUTCOME parses into the fault it names",
        arguments: [
            ("410=unregistered", "410", SimulatorFault.status(410, reason: "Unregistered")),
            ("429=too-many-requests", "429", .status(429, reason: "TooManyRequests")),
            ("503=unavailable", "503", .status(503, reason: "ServiceUnavailable")),
            ("5100=stall", "5100", .stall), ("60A=goaway", "60a", .goaway), ("0=drop", "0", .dropConnection),
        ])
    func parses(text: String, prefix: String, fault: SimulatorFault) throws {
        let parsed = try TokenFault(parsing: text)
        #expect(parsed.prefix == prefix)
        #expect(parsed.fault == fault)
    }

    @Test(
        "a malformed rule is refused with a reason",
        arguments: [
            "410", "=unregistered", "41x=unregistered", "410=nope", "410=",
            String(repeating: "a", count: 65) + "=stall",
        ])
    func refused(text: String) {
        #expect(throws: SimulatorError(.invalidFault, "")) { try TokenFault(parsing: text) }
    }

    @Test("every outcome name parses, and names are unique")
    func everyOutcome() throws {
        for outcome in TokenFault.outcomes {
            #expect(try TokenFault(parsing: "ab=" + outcome.name).fault == outcome.fault)
        }
        #expect(Set(TokenFault.outcomes.map(\.name)).count == TokenFault.outcomes.count)
    }

    @Test("the longest matching prefix answers; other tokens are delivered")
    func longestPrefixWins() async throws {
        let fixture = try SimulatorFixture(tokenFaults: [
            TokenFault(prefix: "41", fault: .status(503, reason: "ServiceUnavailable")),
            TokenFault(prefix: "410", fault: .status(410, reason: "Unregistered")),
        ])
        let token = try fixture.providerToken()
        let unregistered = String(repeating: "4", count: 1) + "10" + String(repeating: "c", count: 61)
        let result = try await fixture.curl(fixture.url(token: unregistered), headers: fixture.headers(token: token))
        #expect(result.status == 410)
        #expect(result.body.contains("Unregistered"))
        let unavailable = "41F" + String(repeating: "c", count: 61)
        #expect(
            try await fixture.curl(fixture.url(token: unavailable), headers: fixture.headers(token: token)).status
                == 503)
        let fine = "4" + String(repeating: "c", count: 63)
        #expect(try await fixture.curl(fixture.url(token: fine), headers: fixture.headers(token: token)).status == 200)
        #expect(fixture.simulator.delivered.map(\.deviceToken) == [fine])
    }
}
