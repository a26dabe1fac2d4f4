import RelayCore
import RelayCrypto
import Testing

/// `duo-relay grant-info`'s answers (docs/DESIGN.md, "Commands"): version and key id from any grant; environment,
/// issue time and expiry with the keys; why it does not open otherwise; never the token.
@Suite struct GrantInspectionTests {
    static let token: [UInt8] = Array(0..<32)
    static let issued: UInt64 = 1_796_481_600  // 2026-12-05T14:40:00Z
    let keys = RelayKeys([3: SymmetricKey.generate(), 4: SymmetricKey.generate()])

    func grant(keyID: UInt8 = 3, environment: APNsEnvironment = .production) throws -> String {
        try GrantCodec.seal(
            Grant(environment: environment, issuedAt: Self.issued, token: Self.token), keyID: keyID, keys: keys)
    }

    func expectNoToken(_ inspection: GrantInspection, sourceLocation: SourceLocation = #_sourceLocation) {
        let text = inspection.lines.joined(separator: "\n").lowercased()
        let hex = Self.token.map {
            String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16)
        }
        .joined()
        #expect(!text.contains(hex) && !text.contains(hex.prefix(16)), sourceLocation: sourceLocation)
    }

    @Test func withTheKeysItSaysEnvironmentIssueAndExpiry() throws {
        let inspection = GrantInspection(
            try grant() + "\n", keys: keys, lifetime: 86_400, lifetimeSource: "grant_lifetime_s of relay.json",
            now: Self.issued + 3_600)
        #expect(inspection.isReadable)
        #expect(
            inspection.lines == [
                "version: 1", "key id: 3", "environment: production", "issued at: 2026-12-05T14:40:00Z",
                "expires at: 2026-12-06T14:40:00Z (valid for 23 hours more)",
                "grant lifetime: 86400 s (grant_lifetime_s of relay.json)",
            ])
        expectNoToken(inspection)
    }

    @Test func anExpiredGrantStillOpensAndSaysSo() throws {
        let inspection = GrantInspection(
            try grant(environment: .sandbox), keys: keys, lifetime: 2_592_000, lifetimeSource: "the default",
            now: Self.issued + 2_592_000)
        #expect(inspection.isReadable && inspection.environment == .sandbox)
        #expect(
            inspection.lines.contains(
                "expires at: 2027-01-04T14:40:00Z (expired: pushes with it get 401 grant_expired)"))
    }

    @Test func withoutTheKeysOnlyTheHeader() throws {
        let inspection = GrantInspection(
            try grant(keyID: 4), keys: nil, lifetime: 1, lifetimeSource: "", now: Self.issued)
        #expect(inspection.isReadable)
        #expect(inspection.lines.prefix(2) == ["version: 1", "key id: 4"])
        #expect(inspection.lines.last?.hasPrefix("not opened: RELAY_KEYS is not given") == true)
        #expect(inspection.environment == nil)
    }

    @Test func whyItDoesNotOpen() throws {
        let other = RelayKeys([3: SymmetricKey.generate()])
        let unknown = GrantInspection(try grant(keyID: 4), keys: other, lifetime: 1, lifetimeSource: "", now: 0)
        #expect(!unknown.isReadable)
        #expect(
            unknown.problem
                == "does not open: RELAY_KEYS has no key 4 (it holds 3); pushes with it get 401 grant_invalid")
        let wrong = GrantInspection(try grant(keyID: 3), keys: other, lifetime: 1, lifetimeSource: "", now: 0)
        #expect(!wrong.isReadable)
        #expect(wrong.problem?.hasPrefix("does not open: key 3 of RELAY_KEYS did not seal it") == true)
        expectNoToken(wrong)
        let garbage = GrantInspection("not a grant!", keys: keys, lifetime: 1, lifetimeSource: "", now: 0)
        #expect(!garbage.isReadable && garbage.version == nil)
        #expect(garbage.lines == ["grant: not a grant: not base64url (without padding) of a grant's bytes"])
        let future = GrantInspection(
            Base64.urlEncode([2, 3] + [UInt8](repeating: 0, count: 40)), keys: keys, lifetime: 1, lifetimeSource: "",
            now: 0)
        #expect(!future.isReadable)
        #expect(future.lines.first == "version: 2 (unknown to this relay)")
        let short = GrantInspection(Base64.urlEncode([1, 3, 9]), keys: keys, lifetime: 1, lifetimeSource: "", now: 0)
        #expect(short.problem?.hasPrefix("does not open: not a grant's length") == true)
    }
}
