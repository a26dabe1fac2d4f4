import Foundation
import RelayCore
import RelayCrypto
import RelayTestSupport
import Testing

/// APNs keys held in a PKCS#11 token (docs/DESIGN.md, "APNs keys in a PKCS#11 token"), with SoftHSM as the token: a
/// directory of its own per test (`SOFTHSM2_CONF`), the key imported with `softhsm2-util --import`. The relay is
/// given the key's URI, the module and the PIN, never the key: its bytes are in none of the relay's variables, files
/// or output, and neither is the PIN.
@Suite struct TokenKeyTests {
    static let module = SoftHSMToken.module
    static let uri = "pkcs11:token=duo-relay;object=apns-sandbox"

    /// A token holding `secrets.apnsKey` as object `apns-sandbox`, id 01.
    static func token(_ secrets: TestSecrets, pin: String = "pin-" + String(UUID().uuidString.prefix(8))) throws
        -> SoftHSMToken
    {
        let token = try SoftHSMToken(label: "duo-relay", pin: pin)
        try token.importKey(pem: secrets.apnsKey.pemRepresentation, object: "apns-sandbox", id: "01")
        return token
    }

    /// The secret form the PIN is given in: a variable, a file named by `_FILE`, a systemd credential.
    enum PINForm: String, CaseIterable, Sendable {
        case variable, file, credential

        /// The relay's variables that give `pin` this way (files made in `directory`).
        func environment(_ pin: String, in directory: URL) throws -> [String: String] {
            switch self {
            case .variable:
                return ["APNS_PKCS11_PIN": pin]
            case .file:
                let path = directory.appendingPathComponent("pin").path
                try (pin + "\n").write(toFile: path, atomically: true, encoding: .utf8)
                return ["APNS_PKCS11_PIN_FILE": path]
            case .credential:
                let credentials = directory.appendingPathComponent("credentials")
                try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
                try pin.write(
                    to: credentials.appendingPathComponent("APNS_PKCS11_PIN"), atomically: true, encoding: .utf8)
                return ["CREDENTIALS_DIRECTORY": credentials.path]
            }
        }
    }

    /// The relay's environment for a sandbox key in `token` named by `uri`: the URI in place of the key.
    static func environment(
        _ token: SoftHSMToken, pin: PINForm = .credential, uri: String = uri, in directory: URL
    ) throws -> [String: String] {
        token.environment.merging(try pin.environment(token.pin, in: directory)) { $1 }
            .merging(["APNS_KEY_SANDBOX": uri]) { $1 }
    }

    static let apnsConfig = #""pkcs11_module":"\#(module)""#

    /// What must never be printed: the PIN, and the key in any of its lines.
    static func secrets(_ token: SoftHSMToken, _ secrets: TestSecrets) -> [String] {
        [token.pin] + secrets.secretStrings
    }

    @Test func pushesAreDeliveredWithAKeyHeldInTheToken() throws {
        let secrets = TestSecrets()
        let token = try Self.token(secrets)
        defer { token.remove() }
        let directory = try RelayProcess.temporaryDirectory()
        let environment = try Self.environment(token, in: directory)
        #expect(!environment.values.contains { $0.contains("PRIVATE KEY") })
        let fixture = try PushFixture(apnsConfig: Self.apnsConfig, secrets: secrets, relayEnvironment: environment)
        let grant = try fixture.grant(token: randomToken())
        for _ in 0..<3 { #expect(try fixture.push(grant: grant).status == 200) }
        // The simulator verified every token against the key's public half.
        #expect(fixture.waitForDeliveries(3).map(\.keyID) == ["TESTKEY001", "TESTKEY001", "TESTKEY001"])
        #expect(fixture.simulator.statistics.distinctProviderTokens == 1)
        #expect(
            fixture.relay.standardError.contains(
                "environments: sandbox (key id TESTKEY001, in the token at \(Self.uri))"),
            "\(fixture.relay.standardError)")
        // An ExpiredProviderToken: the signing thread signs a new token in the token, and the push is retried.
        fixture.simulator.inject(.status(403, reason: "ExpiredProviderToken"))
        #expect(try fixture.push(grant: grant).status == 200)
        #expect(fixture.simulator.statistics.distinctProviderTokens == 2)
        fixture.relay.signal(SIGTERM)
        _ = try fixture.relay.waitForExit()
        for secret in Self.secrets(token, secrets) { #expect(!fixture.relay.allOutput.contains(secret)) }
    }

    /// `check` opens the token, signs one provider token and verifies it against the key's public half; its summary
    /// names the key by id and URI. One environment from the token, the other from a file.
    @Test func checkSignsWithTheTokenBesideAKeyFromAFile() throws {
        let secrets = TestSecrets()
        let token = try Self.token(secrets)
        defer { token.remove() }
        let directory = try RelayProcess.temporaryDirectory()
        let productionKey = P256.Signing.PrivateKey()
        let keyFile = directory.appendingPathComponent("production.p8").path
        try productionKey.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
        let simulator = try PushFixture(
            apnsConfig: Self.apnsConfig, secrets: secrets,
            simulatorKeys: [secrets.keyID: secrets.apnsKey.publicKey, "PRODKEY001": productionKey.publicKey],
            relayEnvironment: try Self.environment(token, in: directory).merging([
                "APNS_KEY_PRODUCTION_FILE": keyFile, "APNS_KEY_ID_PRODUCTION": "PRODKEY001",
            ]) { $1 })
        let config = directory.appendingPathComponent("relay.json").path
        try simulator.relayConfigText.write(toFile: config, atomically: true, encoding: .utf8)
        let check = try CommandRun(
            ["check", "--config", config],
            environment: secrets.environment.merging(simulator.relayEnvironment) { $1 })
        #expect(check.status == 0, "\(check.output)")
        #expect(
            check.standardOutput.contains(
                "environments: sandbox (key id TESTKEY001, in the token at \(Self.uri)), production (key id PRODKEY001)"
            ),
            "\(check.standardOutput)")
        #expect(check.standardOutput.hasSuffix("check: ok\n"))
        for secret in Self.secrets(token, secrets) { #expect(!check.output.contains(secret)) }
        // Both environments deliver, each with its key.
        for environment in ["sandbox", "production"] {
            let grant = try simulator.grant(token: randomToken(), environment: environment)
            #expect(try simulator.push(grant: grant).status == 200)
        }
        #expect(simulator.waitForDeliveries(2).map(\.keyID) == ["TESTKEY001", "PRODKEY001"])
    }

    /// How a token's key can fail to be one usable key, and the words each is refused with.
    enum Fault: String, CaseIterable, Sendable {
        case wrongPIN, missingObject, twoObjects, rsaKey, notAModule, noModule, noPIN

        var expected: String {
            switch self {
            case .wrongPIN:
                "APNS_KEY_SANDBOX: sandbox: the key \(TokenKeyTests.uri) cannot be used: token \"duo-relay\" refused the login: the PIN is wrong (APNS_PKCS11_PIN)"
            case .missingObject:
                "APNS_KEY_SANDBOX: sandbox: the key pkcs11:token=duo-relay;object=elsewhere cannot be used: token \"duo-relay\" holds no private key with token \"duo-relay\", object \"elsewhere\""
            case .twoObjects:
                "cannot be used: token \"duo-relay\" holds 2 private keys with token \"duo-relay\", object \"apns-sandbox\": name one (object=, id=)"
            case .rsaKey:
                "cannot be used: the key with token \"duo-relay\", object \"apns-sandbox\" is an RSA key: APNs keys are EC P-256 (ES256)"
            case .notAModule:
                "cannot be used: \(TokenKeyTests.notAModule) is not a PKCS#11 module (it has no C_GetFunctionList)"
            case .noModule: "apns.pkcs11_module: is not set, but APNS_KEY_SANDBOX names a key in a PKCS#11 token"
            case .noPIN: "APNS_PKCS11_PIN: is not set, but APNS_KEY_SANDBOX names a key in a PKCS#11 token"
            }
        }
    }

    /// A shared library that is not a PKCS#11 module.
    static let notAModule =
        ["/lib/x86_64-linux-gnu/libz.so.1", "/lib/aarch64-linux-gnu/libz.so.1"].first {
            FileManager.default.fileExists(atPath: $0)
        } ?? "/lib/x86_64-linux-gnu/libz.so.1"

    /// Each fault, with the PIN in each secret form: `check` and `serve` refuse with the fault's own line, naming the
    /// environment and the URI, and the PIN is in neither's output.
    @Test(arguments: Fault.allCases, PINForm.allCases)
    func eachTokenProblemIsRefusedInItsOwnWords(_ fault: Fault, _ form: PINForm) throws {
        let secrets = TestSecrets()
        let token = try SoftHSMToken(label: "duo-relay", pin: "pin-" + String(UUID().uuidString.prefix(8)))
        defer { token.remove() }
        switch fault {
        case .twoObjects:
            try token.importKey(pem: secrets.apnsKey.pemRepresentation, object: "apns-sandbox", id: "01")
            try token.importKey(pem: P256.Signing.PrivateKey().pemRepresentation, object: "apns-sandbox", id: "02")
        case .rsaKey:
            try token.importRSAKey(object: "apns-sandbox", id: "01")
        default:
            try token.importKey(pem: secrets.apnsKey.pemRepresentation, object: "apns-sandbox", id: "01")
        }
        let directory = try RelayProcess.temporaryDirectory()
        var given = token
        if fault == .wrongPIN {
            given = SoftHSMToken(copying: token, pin: "wrong-" + String(UUID().uuidString.prefix(8)))
        }
        var environment = try Self.environment(
            given, pin: form, uri: fault == .missingObject ? "pkcs11:token=duo-relay;object=elsewhere" : Self.uri,
            in: directory)
        if fault == .noPIN {
            environment = environment.filter {
                !["APNS_PKCS11_PIN", "APNS_PKCS11_PIN_FILE", "CREDENTIALS_DIRECTORY"].contains($0.key)
            }
        }
        let module = fault == .notAModule ? Self.notAModule : Self.module
        let config = directory.appendingPathComponent("relay.json").path
        try RelayProcess.config(apns: fault == .noModule ? "" : #""pkcs11_module":"\#(module)""#)
            .write(toFile: config, atomically: true, encoding: .utf8)
        let all = secrets.environment.merging(environment) { $1 }
        let check = try CommandRun(["check", "--config", config], environment: all)
        #expect(check.status == 1)
        let failed = check.logMessages.filter { $0.hasPrefix("check failed: ") }
        #expect(failed.count == 1 && failed[0].contains(fault.expected), "\(check.output)")
        let serve = try CommandRun.run(["serve", "--config", config], environment: all)
        #expect(serve.status == 1)
        // One log line (a time, a level and one `duo-relay` prefix) naming the problem.
        let refused = serve.standardError.split(separator: "\n").filter { $0.contains(fault.expected) }
        #expect(
            refused.count == 1 && LogLine.parse(refused[0])?.message.contains(fault.expected) == true,
            "\(serve.output)")
        for secret in [token.pin, given.pin] + secrets.secretStrings {
            #expect(!check.output.contains(secret) && !serve.output.contains(secret))
        }
    }

    /// The token goes away while the relay runs (its directory moved), and comes back: signing fails, which is said
    /// in one line naming the environment and the URI; the token in force keeps serving; the signing is retried, and
    /// once it works again one line says so.
    @Test func aTokenThatGoesAwayAndComesBack() throws {
        let secrets = TestSecrets()
        let token = try Self.token(secrets)
        defer { token.remove() }
        let directory = try RelayProcess.temporaryDirectory()
        // One worker and one APNs connection: the simulator, like APNs, lets a connection take a new token within
        // 20 minutes only after it answered ExpiredProviderToken, and it is this connection that answers it.
        let fixture = try PushFixture(
            relayConfig: #""ip_limit":{"requests":100000,"period_s":10,"block_s":10},"server":{"threads":1}"#,
            apnsConfig: Self.apnsConfig + #","max_connections":1"#, secrets: secrets,
            relayEnvironment: try Self.environment(token, pin: .file, in: directory))
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)
        let away = token.directory.appendingPathComponent("away")
        try FileManager.default.moveItem(at: token.tokens, to: away)
        // APNs calls the token expired: the new one cannot be signed, so this push fails...
        fixture.simulator.inject(.status(403, reason: "ExpiredProviderToken"))
        #expect(try fixture.push(grant: grant).status == 502)
        try Poll.wait(for: "the signing problem's line", within: .seconds(10)) {
            fixture.relay.standardError.contains("the APNs key cannot sign a provider token")
        }
        let problem = fixture.relay.standardError.split(separator: "\n").filter {
            $0.contains("the APNs key cannot sign a provider token")
        }
        #expect(problem.count == 1)
        #expect(
            problem.first?.contains(
                "apns sandbox: the APNs key cannot sign a provider token: key id TESTKEY001, in the token at \(Self.uri)"
            ) == true,
            "\(problem)")
        // ...but the token in force is still valid, and serves.
        #expect(try fixture.push(grant: grant).status == 200)
        try FileManager.default.moveItem(at: away, to: token.tokens)
        let resolved = Poll.until(within: .seconds(30), every: .milliseconds(50)) {
            fixture.relay.standardError.contains("resolved: the APNs key cannot sign a provider token")
        }
        #expect(resolved, "\(fixture.relay.standardError)")
        let after = try fixture.push(grant: grant)
        #expect(after.status == 200, "\(after.text) \(fixture.relay.standardError)")
        #expect(fixture.simulator.statistics.distinctProviderTokens == 2)
        for secret in Self.secrets(token, secrets) { #expect(!fixture.relay.allOutput.contains(secret)) }
    }

    /// SIGHUP with only the PIN changed, to a wrong one: the relay is logged into the token already (which answers
    /// any PIN as logged in), yet the reload is refused naming the environment and the URI, never the PIN, and the
    /// running key stays and still signs (a new provider token after ExpiredProviderToken); the right PIN is taken.
    @Test func aReloadWithAWrongPINIsRefused() throws {
        let secrets = TestSecrets()
        let token = try Self.token(secrets)
        defer { token.remove() }
        let directory = try RelayProcess.temporaryDirectory()
        // One worker and one APNs connection: the simulator, like APNs, lets a connection take a new token within
        // 20 minutes only after it answered ExpiredProviderToken, and it is this connection that answers it.
        let fixture = try PushFixture(
            relayConfig: #""server":{"threads":1}"#, apnsConfig: Self.apnsConfig + #","max_connections":1"#,
            secrets: secrets, relayEnvironment: try Self.environment(token, pin: .file, in: directory))
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)
        let pinFile = directory.appendingPathComponent("pin")
        let wrong = "wrong-" + String(UUID().uuidString.prefix(8))
        try (wrong + "\n").write(to: pinFile, atomically: true, encoding: .utf8)
        fixture.relay.signal(SIGHUP)
        try Poll.wait(for: "\"reload refused\" printed", within: .seconds(10)) {
            fixture.relay.standardError.contains("reload refused")
        }
        let refused = fixture.relay.logMessages.filter { $0.contains("reload refused") }
        #expect(
            refused.count == 1
                && refused[0].contains(
                    "APNS_KEY_SANDBOX: sandbox: the key \(Self.uri) cannot be used: token \"duo-relay\" refused the "
                        + "login: the PIN is wrong (APNS_PKCS11_PIN)"),
            "\(fixture.relay.standardError)")
        // The running key serves, and signs a new token when APNs calls the one in force expired.
        #expect(try fixture.push(grant: grant).status == 200)
        fixture.simulator.inject(.status(403, reason: "ExpiredProviderToken"))
        #expect(try fixture.push(grant: grant).status == 200)
        #expect(fixture.simulator.statistics.distinctProviderTokens == 2)
        try (token.pin + "\n").write(to: pinFile, atomically: true, encoding: .utf8)
        fixture.relay.signal(SIGHUP)
        try Poll.wait(for: "\"reloaded\" printed", within: .seconds(10)) {
            fixture.relay.standardError.contains("reloaded: ")
        }
        #expect(try fixture.push(grant: grant).status == 200)
        #expect(fixture.waitForDeliveries(4).map(\.keyID) == Array(repeating: "TESTKEY001", count: 4))
        for secret in Self.secrets(token, secrets) + [wrong] { #expect(!fixture.relay.allOutput.contains(secret)) }
    }

    /// SIGHUP to a new key and id in the same token is taken; a URI that names another key under the running id is
    /// refused, as a new file would be (the key is compared by its public half).
    @Test func aReloadToANewKeyInTheToken() throws {
        var secrets = TestSecrets()
        let token = try Self.token(secrets)
        defer { token.remove() }
        let newKey = P256.Signing.PrivateKey()
        try token.importKey(pem: newKey.pemRepresentation, object: "apns-next", id: "02")
        let directory = try RelayProcess.temporaryDirectory()
        let keyFile = directory.appendingPathComponent("apns.uri").path
        let idFile = directory.appendingPathComponent("apns.id").path
        try Self.uri.write(toFile: keyFile, atomically: true, encoding: .utf8)
        try secrets.keyID.write(toFile: idFile, atomically: true, encoding: .utf8)
        var environment = try Self.environment(token, pin: .variable, in: directory)
        environment["APNS_KEY_SANDBOX"] = ""
        environment["APNS_KEY_SANDBOX_FILE"] = keyFile
        environment["APNS_KEY_ID_SANDBOX"] = ""
        environment["APNS_KEY_ID_SANDBOX_FILE"] = idFile
        let fixture = try PushFixture(
            apnsConfig: Self.apnsConfig, secrets: secrets,
            simulatorKeys: [secrets.keyID: secrets.apnsKey.publicKey, "NEWKEY0002": newKey.publicKey],
            relayEnvironment: environment)
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)
        // Another key under the running id: refused.
        let nextURI = "pkcs11:token=duo-relay;object=apns-next"
        try nextURI.write(toFile: keyFile, atomically: true, encoding: .utf8)
        fixture.relay.signal(SIGHUP)
        try Poll.wait(for: "\"reload refused\" printed", within: .seconds(10)) {
            fixture.relay.standardError.contains("reload refused")
        }
        #expect(
            fixture.relay.standardError.contains(
                "APNS_KEY_SANDBOX: sandbox: a new key under the running key id TESTKEY001"))
        #expect(try fixture.push(grant: grant).status == 200)
        // The new key with its id: taken.
        try "NEWKEY0002".write(toFile: idFile, atomically: true, encoding: .utf8)
        fixture.relay.signal(SIGHUP)
        try Poll.wait(for: "\"reloaded\" printed", within: .seconds(10)) {
            fixture.relay.standardError.contains("reloaded: ")
        }
        secrets.apnsKey = newKey
        #expect(try fixture.push(grant: grant).status == 200)
        #expect(fixture.waitForDeliveries(3).map(\.keyID) == ["TESTKEY001", "TESTKEY001", "NEWKEY0002"])
        for secret in [token.pin] + secrets.secretStrings { #expect(!fixture.relay.allOutput.contains(secret)) }
    }
}
