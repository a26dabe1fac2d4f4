import Foundation
import RelayCrypto
import RelayTestSupport
import Testing

/// `check` sees what `serve` will see in each deployment form and reports every problem in one run.
@Suite struct CheckEveryProblemTests {
    @Test func everyProblemIsReportedInOneRunOneLineEach() throws {
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = directory.appendingPathComponent("relay.json").path
        try #"""
        {"listen":"127.0.0.1:0","grant_lifetme_s":5,"server":{"threads":0},
         "apns":{"topic":"app.openduo.pocket","ca_file":"\#(directory.path)/missing-ca.pem"}}
        """#.write(toFile: config, atomically: true, encoding: .utf8)
        var environment = TestSecrets().environment
        environment["RELAY_KEYS"] = nil
        environment["APNS_TEAM_ID"] = "lowercase!"
        let result = try CommandRun.run(["check", "--config", config], environment: environment)
        #expect(result.status == 1)
        #expect(result.standardOutput.isEmpty, "\(result.standardOutput)")
        let lines = result.standardError.split(separator: "\n").map(String.init)
        let subjects = ["grant_lifetme_s", "server.threads", "RELAY_KEYS", "APNS_TEAM_ID", "apns.ca_file"]
        #expect(lines.count == subjects.count, "\(result.standardError)")
        for subject in subjects {
            #expect(
                lines.contains { $0.hasPrefix("check failed: \(subject): ") }, "\(subject): \(result.standardError)")
        }
        #expect(!result.output.contains("lowercase!"))
        // serve refuses the same, and says so the same way.
        let serve = try CommandRun.run(["serve", "--config", config], environment: environment, timeoutSeconds: 10)
        #expect(serve.status == 1)
        for subject in subjects.dropLast() {
            #expect(serve.standardError.contains("duo-relay: \(subject): "), "\(subject): \(serve.standardError)")
        }
    }

    /// The systemd rotation recipe: replace the credential file, `check`, restart. By hand, `check` is pointed at
    /// the credentials directory with `--credentials-dir`, and sees what the unit will load at its next start.
    @Test func checkByHandSeesTheSystemdCredentials() throws {
        let secrets = TestSecrets()
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let credentials = directory.appendingPathComponent("credentials")
        try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
        let keysFile = credentials.appendingPathComponent("RELAY_KEYS").path
        try (secrets.relayKeysJSON + "\n").write(toFile: keysFile, atomically: true, encoding: .utf8)
        try secrets.apnsKey.pemRepresentation.write(
            to: credentials.appendingPathComponent("APNS_KEY_SANDBOX"), atomically: true, encoding: .utf8)
        let config = directory.appendingPathComponent("relay.json").path
        try RelayProcess.config().write(toFile: config, atomically: true, encoding: .utf8)
        // The ids, as relay.env gives them: not secrets.
        let ids = ["APNS_TEAM_ID": secrets.teamID, "APNS_KEY_ID_SANDBOX": secrets.keyID]

        // Without the credentials, nothing secret is found: the hint names --credentials-dir, not only keygen.
        let blind = try CommandRun.run(["check", "--config", config], environment: ids)
        #expect(blind.status == 1)
        #expect(blind.standardError.contains("check failed: RELAY_KEYS: is not set"), "\(blind.output)")
        #expect(
            blind.standardError.contains(
                "RELAY_KEYS: is not set, and no APNs key is either: to check the secrets a systemd unit loads as "
                    + "credentials, give --credentials-dir DIR"), "\(blind.output)")

        let seeing = try CommandRun.run(
            ["check", "--config", config, "--credentials-dir", credentials.path], environment: ids)
        #expect(seeing.status == 0, "\(seeing.output)")
        #expect(seeing.standardOutput.contains("relay keys: 1; grants sealed with key 1"), "\(seeing.output)")

        // Rotation: a second key added to the credential file (keygen --merge), then check.
        let merged = try CommandRun.run(["keygen", "--id", "2", "--merge", keysFile])
        #expect(merged.status == 0, "\(merged.output)")
        try merged.standardOutput.write(toFile: keysFile, atomically: true, encoding: .utf8)
        let rotated = try CommandRun.run(
            ["check", "--config", config, "--credentials-dir", credentials.path], environment: ids)
        #expect(rotated.status == 0, "\(rotated.output)")
        #expect(rotated.standardOutput.contains("relay keys: 1, 2; grants sealed with key 1"), "\(rotated.output)")

        // The same as $CREDENTIALS_DIRECTORY, which serve reads under systemd; the flag wins over it.
        var underSystemd = ids
        underSystemd["CREDENTIALS_DIRECTORY"] = credentials.path
        #expect(try CommandRun.run(["check", "--config", config], environment: underSystemd).status == 0)
        let wrong = try CommandRun.run(
            ["check", "--config", config, "--credentials-dir", directory.appendingPathComponent("nowhere").path],
            environment: underSystemd)
        #expect(wrong.status == 1)
        #expect(wrong.standardError.contains("check failed: --credentials-dir: names no directory"), "\(wrong.output)")
        for run in [blind, seeing, rotated, wrong] {
            for secret in secrets.secretStrings { #expect(!run.output.contains(secret)) }
        }
    }

    /// The `--credentials-dir` hint only where it is the likely fix: an APNs key given (so the secrets are not all
    /// elsewhere) leaves RELAY_KEYS's hint at keygen; a credentials directory that lacks a file names the path read
    /// (built from the directory and the name: never a value that could be a misplaced secret).
    @Test func checkNamesWhereASecretWasLookedFor() throws {
        let secrets = TestSecrets()
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = directory.appendingPathComponent("relay.json").path
        try RelayProcess.config().write(toFile: config, atomically: true, encoding: .utf8)
        var withKey = secrets.environment
        withKey["RELAY_KEYS"] = nil
        let keygen = try CommandRun.run(["check", "--config", config], environment: withKey)
        #expect(keygen.status == 1)
        let line = keygen.standardError.split(separator: "\n").first { $0.contains("RELAY_KEYS") } ?? ""
        #expect(line.hasPrefix("check failed: RELAY_KEYS: is not set: run `"), "\(keygen.output)")
        #expect(!line.contains("--credentials-dir"), "\(line)")

        // A credentials directory with only the APNs key: the missing RELAY_KEYS file is named by its path.
        let credentials = directory.appendingPathComponent("credentials")
        try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
        try secrets.apnsKey.pemRepresentation.write(
            to: credentials.appendingPathComponent("APNS_KEY_SANDBOX"), atomically: true, encoding: .utf8)
        let ids = ["APNS_TEAM_ID": secrets.teamID, "APNS_KEY_ID_SANDBOX": secrets.keyID]
        let missingFile = try CommandRun.run(
            ["check", "--config", config, "--credentials-dir", credentials.path], environment: ids)
        #expect(missingFile.status == 1)
        #expect(
            missingFile.standardError.contains(
                "check failed: RELAY_KEYS: is not set (no credential file \(credentials.path)/RELAY_KEYS): run `"),
            "\(missingFile.output)")

        for run in [keygen, missingFile] {
            for secret in secrets.secretStrings { #expect(!run.output.contains(secret)) }
        }
    }

    /// The summary says where the relay will be scraped and which APNs origins and CAs it will trust.
    @Test func theSummaryNamesMetricsTheAPNsOriginsAndTheCAFile() throws {
        let secrets = TestSecrets()
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = directory.appendingPathComponent("relay.json").path
        try RelayProcess.config().write(toFile: config, atomically: true, encoding: .utf8)
        let plain = try CommandRun.run(["check", "--config", config], environment: secrets.environment)
        #expect(plain.status == 0, "\(plain.output)")
        #expect(plain.standardOutput.contains("\nmetrics: none (metrics_listen not set)\n"), "\(plain.output)")
        #expect(
            plain.standardOutput.contains(
                "\napns origins: sandbox https://api.sandbox.push.apple.com; trusted CAs: the system's (no "
                    + "apns.ca_file)\n"), "\(plain.output)")

        var both = secrets
        both.environments = ["SANDBOX", "PRODUCTION"]
        try RelayProcess.config(
            extra: #""metrics_listen":"127.0.0.1:9787""#,
            apns: #""sandbox_origin":"https://127.0.0.1:2197","ca_file":"\#(TestPKI.shared.caFile)""#
        ).write(toFile: config, atomically: true, encoding: .utf8)
        let configured = try CommandRun.run(["check", "--config", config], environment: both.environment)
        #expect(configured.status == 0, "\(configured.output)")
        #expect(
            configured.standardOutput.contains("\nmetrics: 127.0.0.1:9787 (metrics_listen)\n"), "\(configured.output)")
        #expect(
            configured.standardOutput.contains(
                "\napns origins: sandbox https://127.0.0.1:2197, production https://api.push.apple.com; trusted CAs: "
                    + "the system's and apns.ca_file \(TestPKI.shared.caFile)\n"), "\(configured.output)")
    }

    /// An APNs key in the SEC1 form (`openssl ec` output, "BEGIN EC PRIVATE KEY") is accepted by check and serve
    /// alike, and signs: docs/operations/configuration.md says both forms are read.
    @Test func aSEC1KeyPassesCheckAndDelivers() throws {
        let secrets = TestSecrets()
        let sec1 = try Self.sec1(secrets.apnsKey)
        #expect(sec1.hasPrefix("-----BEGIN EC PRIVATE KEY-----"))
        let fixture = try PushFixture(secrets: secrets, relayEnvironment: ["APNS_KEY_SANDBOX": sec1])
        let config = fixture.relay.directory.appendingPathComponent("relay.json").path
        var environment = secrets.environment
        environment["APNS_KEY_SANDBOX"] = sec1
        let check = try CommandRun.run(["check", "--config", config], environment: environment)
        #expect(check.status == 0, "\(check.output)")
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)
        #expect(fixture.waitForDeliveries(1).count == 1)
        let readme = try String(
            contentsOf: Self.root.appendingPathComponent("docs/operations/configuration.md"), encoding: .utf8)
        #expect(readme.contains("`BEGIN EC PRIVATE KEY`"))
    }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func sec1(_ key: P256.Signing.PrivateKey) throws -> String {
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("key.p8").path
        let output = directory.appendingPathComponent("key.pem").path
        try key.pemRepresentation.write(toFile: input, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["ec", "-in", input, "-out", output]
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return try String(contentsOfFile: output, encoding: .utf8)
    }
}
