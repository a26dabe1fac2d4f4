import Foundation
import RelayCrypto
import RelayTestSupport
import Testing

/// `duo-relay grant-info` through the binary (docs/DESIGN.md, "Commands"): a grant a relay minted, on standard
/// input; what it says with RELAY_KEYS in each secret form and without; never the device token.
@Suite struct GrantInfoCommandTests {
    /// Runs `duo-relay grant-info <arguments>` with `grant` on standard input.
    func grantInfo(_ grant: String, _ arguments: [String] = [], environment: [String: String] = [:]) throws
        -> CommandRun
    {
        let command = #"printf '%s\n' "$GRANT" | "$BINARY" grant-info "$@""#
        return try CommandRun.run(
            ["/bin/sh", "-c", command, "sh"] + arguments,
            shell: environment.merging(["GRANT": grant, "BINARY": RelayProcess.binary.path]) { a, _ in a })
    }

    @Test func itSaysKeyEnvironmentAndExpiryNeverTheToken() throws {
        let secrets = TestSecrets()
        let fixture = try PushFixture(relayConfig: #""grant_lifetime_s":3600"#, secrets: secrets)
        let token = randomToken()
        let grant = try fixture.grant(token: token)
        let config = fixture.relay.directory.appendingPathComponent("relay.json").path
        let before = Date()

        let opened = try grantInfo(grant, ["--config", config], environment: ["RELAY_KEYS": secrets.relayKeysJSON])
        #expect(opened.status == 0, "\(opened.output)")
        let lines = opened.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.prefix(3) == ["version: 1", "key id: 1", "environment: sandbox"], "\(lines)")
        let issued = try #require(lines.first { $0.hasPrefix("issued at: ") })
        let issuedDate = try #require(ISO8601DateFormatter().date(from: String(issued.dropFirst("issued at: ".count))))
        #expect(abs(issuedDate.timeIntervalSince(before)) < 120)
        #expect(
            lines.contains { $0.hasPrefix("expires at: ") && $0.hasSuffix("(valid for 59 minutes more)") }
                || lines.contains { $0.hasPrefix("expires at: ") && $0.hasSuffix("(valid for 60 minutes more)") },
            "\(lines)")
        #expect(lines.last == "grant lifetime: 3600 s (grant_lifetime_s of \(config))")
        for secret in [token, token.uppercased(), grant] + secrets.secretStrings {
            #expect(!opened.output.contains(secret))
        }

        // As a file (RELAY_KEYS_FILE), without --config: the default lifetime, said so.
        let keysFile = fixture.relay.directory.appendingPathComponent("relay-keys").path
        try secrets.relayKeysJSON.write(toFile: keysFile, atomically: true, encoding: .utf8)
        let fromFile = try grantInfo(grant, environment: ["RELAY_KEYS_FILE": keysFile])
        #expect(fromFile.status == 0, "\(fromFile.output)")
        #expect(fromFile.standardOutput.contains("grant lifetime: 2592000 s (the default; --config FILE gives"))

        // As a systemd credential ($CREDENTIALS_DIRECTORY/RELAY_KEYS).
        let credentials = fixture.relay.directory.appendingPathComponent("credentials")
        try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
        try secrets.relayKeysJSON.write(
            to: credentials.appendingPathComponent("RELAY_KEYS"), atomically: true, encoding: .utf8)
        let credential = try grantInfo(grant, environment: ["CREDENTIALS_DIRECTORY": credentials.path])
        #expect(credential.status == 0, "\(credential.output)")
        #expect(credential.standardOutput.contains("environment: sandbox\n"), "\(credential.output)")

        // Without RELAY_KEYS: the header only.
        let header = try grantInfo(grant)
        #expect(header.status == 0, "\(header.output)")
        #expect(header.standardOutput.hasPrefix("version: 1\nkey id: 1\nnot opened: RELAY_KEYS is not given"))

        // Another key with the same id: it does not open, and says why.
        let other = #"{"1":"\#(Base64.urlEncode(SecureRandom.bytes(count: 32)))"}"#
        let wrong = try grantInfo(grant, environment: ["RELAY_KEYS": other])
        #expect(wrong.status == 1)
        #expect(wrong.standardOutput.contains("does not open: key 1 of RELAY_KEYS did not seal it"), "\(wrong.output)")
        let garbage = try grantInfo("hello world", environment: ["RELAY_KEYS": other])
        #expect(garbage.status == 1)
        #expect(garbage.standardOutput.hasPrefix("grant: not a grant"), "\(garbage.output)")
    }

    @Test func problemsAndUsage() throws {
        let usage = try grantInfo("x", ["--bogus"])
        #expect(usage.status == 64)
        #expect(usage.standardError.contains("--bogus"), "\(usage.output)")
        let missing = try grantInfo("x", ["--config", "/nonexistent/relay.json"])
        #expect(missing.status == 1)
        #expect(missing.standardError.contains("--config: /nonexistent/relay.json cannot be read"))
        let badKeys = try grantInfo("x", environment: ["RELAY_KEYS": "not json"])
        #expect(badKeys.status == 1)
        #expect(badKeys.standardError.contains("RELAY_KEYS"), "\(badKeys.output)")
        #expect(!badKeys.output.contains("not json"))
    }
}
