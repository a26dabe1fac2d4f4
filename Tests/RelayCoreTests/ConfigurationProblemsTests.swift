import Foundation
import RelayCore
import RelayCrypto
import Testing

/// `check` reports every problem in one run: the configuration and the secrets are read past each
/// problem, and each problem names its own key.
@Suite struct ConfigurationProblemsTests {
    @Test func everyBadKeyOfTheFileIsFound() {
        let text = #"""
            {"listen":"localhost:1","grant_lifetme_s":3,"grant_key_id":300,"push_limit":{"requests":0,"period_s":0},
             "apns":{"topic":"","sandbox_origin":"https://127.0.0.1:","production_origin":"http://x","timeout_ms":1},
             "server":{"threads":0,"max_connections":0}}
            """#
        let (_, problems) = RelayConfiguration.check(Array(text.utf8))
        #expect(
            problems.map(\.subject) == [
                "grant_lifetme_s", "listen", "grant_key_id", "push_limit.requests", "push_limit.period_s", "apns.topic",
                "apns.sandbox_origin", "apns.production_origin", "apns.timeout_ms", "server.max_connections",
                "server.threads",
            ])
        // parse stops at the first, as before.
        #expect(throws: ConfigurationError(.unknownKey, "grant_lifetme_s", "")) {
            try RelayConfiguration.parse(Array(text.utf8))
        }
    }

    @Test func everyBadKeyOfTheLimitsStoreIsFound() {
        let text = #"""
            {"apns":{"topic":"a.b"},"limits_store":{"kind":"redis","url":"redis://127.0.0.1:6379/0","timeout_ms":0,
             "on_failure":"panic","key_prefix":"with space","ca_file":"/ca.pem","colour":1}}
            """#
        #expect(
            RelayConfiguration.check(Array(text.utf8)).problems.map(\.subject) == [
                "limits_store.colour", "limits_store.timeout_ms", "limits_store.on_failure", "limits_store.key_prefix",
                "limits_store.ca_file",
            ])
        let noURL = #"{"apns":{"topic":"a.b"},"limits_store":{"kind":"redis","username":""}}"#
        #expect(
            RelayConfiguration.check(Array(noURL.utf8)).problems.map(\.subject) == [
                "limits_store.username", "limits_store.url",
            ])
    }

    @Test func theKeysThatAreRightAreReadBesideThoseThatAreNot() {
        let text = #"{"apns":{"topic":"a.b","ca_file":"/ca.pem","timeout_ms":1},"grant_key_id":7}"#
        let (configuration, problems) = RelayConfiguration.check(Array(text.utf8))
        #expect(problems.map(\.subject) == ["apns.timeout_ms"])
        #expect(configuration.apns.caFile == "/ca.pem")
        #expect(configuration.grantKeyID == 7)
    }

    /// An origin with an empty port (`https://127.0.0.1:$PORT` with PORT unset) is the origin's fault.
    @Test(arguments: [
        "https://127.0.0.1:", "https://127.0.0.1:0", "https://127.0.0.1:65536", "https://host:12a", "https://:443",
        "https://[::1", "https://a:1:2", "https://user@host", "https://host?x",
    ])
    func anOriginWithoutAUsablePortOrHostIsRefusedByItsKey(_ origin: String) {
        let text = #"{"apns":{"topic":"a.b","sandbox_origin":"\#(origin)","ca_file":"/ca.pem"}}"#
        #expect(RelayConfiguration.check(Array(text.utf8)).problems.map(\.subject) == ["apns.sandbox_origin"])
    }

    @Test(arguments: ["https://127.0.0.1:4443", "https://[::1]:4443", "https://api.push.apple.com", "https://[::1]"])
    func usableOriginsPass(_ origin: String) throws {
        let text = #"{"apns":{"topic":"a.b","production_origin":"\#(origin)"}}"#
        #expect(try RelayConfiguration.parse(Array(text.utf8)).apns.productionOrigin == origin)
    }

    @Test func everySecretAtFaultIsNamed() {
        let source = SecretSource(
            environment: [
                "RELAY_KEYS": "{}", "APNS_KEY_SANDBOX": "not a key", "APNS_KEY_ID_SANDBOX": "short",
                "APNS_KEY_ID_PRODUCTION": "KEYID12345", "APNS_TEAM_ID": "team",
            ], readFile: { _ in throw ConfigurationError(.unreadable, "", "") })
        let checked = RelaySecrets.check(from: source)
        #expect(checked.secrets == nil)
        #expect(
            checked.problems.map(\.subject) == [
                "RELAY_KEYS", "APNS_KEY_ID_SANDBOX", "APNS_KEY_SANDBOX", "APNS_KEY_PRODUCTION", "APNS_TEAM_ID",
            ])
        for problem in checked.problems { #expect(!problem.description.contains("not a key")) }
    }

    /// Both forms of an APNs key are accepted (docs/operations/configuration.md, "Secrets"): PKCS#8, as Apple's .p8, and SEC1.
    @Test func anAPNsKeyIsReadAsPKCS8OrSEC1AndOtherwiseRefusedNamingTheForms() throws {
        let key = P256.Signing.PrivateKey()
        for pem in [key.pemRepresentation, try Self.sec1(key)] {
            let source = SecretSource(
                environment: [
                    "RELAY_KEYS": #"{"1":"\#(Base64.urlEncode([UInt8](repeating: 1, count: 32)))"}"#,
                    "APNS_KEY_SANDBOX": pem, "APNS_KEY_ID_SANDBOX": "KEYID12345", "APNS_TEAM_ID": "TEAM123456",
                ], readFile: { _ in "" })
            let secrets = try RelaySecrets.load(from: source)
            #expect(secrets.apnsKeys[.sandbox]?.signer?.publicKey.pemRepresentation == key.publicKey.pemRepresentation)
        }
        let refused = RelaySecrets.check(
            from: SecretSource(
                environment: [
                    "APNS_KEY_PRODUCTION": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                    "APNS_KEY_ID_PRODUCTION": "KEYID12345",
                ], readFile: { _ in "" })
        ).problems.first { $0.subject == "APNS_KEY_PRODUCTION" }
        #expect(refused?.reason.contains("PKCS#8") == true && refused?.reason.contains("SEC1") == true)
    }

    /// The SEC1 ("BEGIN EC PRIVATE KEY") PEM of `key`, as `openssl ec` writes it.
    static func sec1(_ key: P256.Signing.PrivateKey) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["ec"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data(key.pemRepresentation.utf8))
        try input.fileHandleForWriting.close()
        let pem = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(pem.hasPrefix("-----BEGIN EC PRIVATE KEY-----"))
        return pem
    }
}
