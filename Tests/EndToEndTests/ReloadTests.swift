import Foundation
import RelayTestSupport
import Testing

/// SIGHUP says, in its `reloaded: …` line, which changed settings it did not apply.
@Suite struct ReloadTests {

    func reloadedLines(_ relay: RelayProcess) -> [Substring] {
        relay.standardError.split(separator: "\n").filter { $0.hasPrefix("duo-relay: reloaded: ") }
    }

    @Test func aReloadNamesTheSettingsThatNeedARestart() throws {
        let relay = try RelayProcess(
            config: RelayProcess.config(extra: #""grant_lifetime_s":100"#), secrets: TestSecrets())
        let path = relay.directory.appendingPathComponent("relay.json").path
        // Nothing restart-only changed: the line says nothing of a restart.
        try RelayProcess.config(extra: #""grant_lifetime_s":200"#).write(
            toFile: path, atomically: true, encoding: .utf8)
        relay.signal(SIGHUP)
        try Poll.wait(for: "one reloaded line", within: .seconds(15)) { reloadedLines(relay).count == 1 }
        #expect(!reloadedLines(relay)[0].contains("restart"), "\(reloadedLines(relay)[0])")
        // listen, the address limit and the server settings changed: named in the same line.
        let changed = RelayProcess.config(
            extra: #""grant_lifetime_s":200,"ip_limit":{"requests":5},"server":{"threads":3}"#
        ).replacingOccurrences(of: "127.0.0.1:0", with: "127.0.0.1:1")
        try changed.write(toFile: path, atomically: true, encoding: .utf8)
        relay.signal(SIGHUP)
        try Poll.wait(for: "two reloaded lines", within: .seconds(15)) { reloadedLines(relay).count == 2 }
        let line = reloadedLines(relay)[1]
        #expect(line.contains("not applied until a restart: listen, ip_limit, server"), "\(line)")
        // The relay still listens where it started.
        #expect(try relay.connect().request("GET", "/healthz").status == 200)
    }

    /// systemd's `systemctl restart` then `systemctl reload` (docs/operations/keys.md's rotation): with `Type=exec` the reload's
    /// SIGHUP can come while the relay is still starting, before it listens. It must neither end the process (SIGHUP's
    /// default action, which is what happened) nor be lost: the relay serves, then carries it out.
    @Test func aReloadWhileStartingIsCarriedOutOnceServing() throws {
        let directory = try RelayProcess.temporaryDirectory()
        let path = directory.appendingPathComponent("relay.json").path
        try RelayProcess.config(extra: #""grant_lifetime_s":100"#).write(
            toFile: path, atomically: true, encoding: .utf8)
        let relay = try RelayProcess(
            arguments: ["serve", "--config", path], environment: TestSecrets().environment, directory: directory)
        // The relay starts its first threads (the workers' loops) while it starts, before it listens: SIGHUP then.
        let pid = relay.process.processIdentifier
        try Poll.wait(for: "the relay's first threads", within: .seconds(30), every: .microseconds(200)) {
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let threads = status.split(separator: "\n").first { $0.hasPrefix("Threads:") }
            return Int(threads?.split(separator: "\t").last ?? "") ?? 0 >= 2 || !relay.process.isRunning
        }
        relay.signal(SIGHUP)
        try relay.waitForPort()
        try Poll.wait(for: "the reloaded line", within: .seconds(15)) { reloadedLines(relay).count == 1 }
        #expect(relay.process.isRunning)
        #expect(try relay.connect().request("GET", "/healthz").status == 200)
    }

    /// SECURITY.md's rotation steps match what SIGHUP does: it re-reads `NAME_FILE` secrets only, so a
    /// rotation of a plain variable or a systemd credential is a restart. The relay below shows it: a new
    /// `RELAY_KEYS_FILE` is taken on SIGHUP.
    @Test func securityRotationStepsSayWhatSighupReReads() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let security = try String(contentsOf: root.appendingPathComponent("SECURITY.md"), encoding: .utf8)
        let section = try #require(
            security.components(separatedBy: "\n## ").first {
                $0.hasPrefix("Rotating relay keys without breaking grants")
            })
        #expect(!section.contains("re-reads secrets"))
        #expect(section.contains("the secrets given as `NAME_FILE`"))
        #expect(section.contains("keeps the value the process started with"))

        var secrets = TestSecrets()
        let directory = try RelayProcess.temporaryDirectory()
        let keysFile = directory.appendingPathComponent("relay_keys").path
        try secrets.relayKeysJSON.write(toFile: keysFile, atomically: true, encoding: .utf8)
        let relay = try RelayProcess(
            config: RelayProcess.config(), secrets: secrets,
            extraEnvironment: ["RELAY_KEYS": "", "RELAY_KEYS_FILE": keysFile])
        secrets.relayKeys[2] = [UInt8](repeating: 7, count: 32)
        try secrets.relayKeysJSON.write(toFile: keysFile, atomically: true, encoding: .utf8)
        relay.signal(SIGHUP)
        try Poll.wait(for: "one reloaded line", within: .seconds(15)) { reloadedLines(relay).count == 1 }
        #expect(reloadedLines(relay)[0].contains("relay keys 1, 2;"), "\(reloadedLines(relay)[0])")
    }

    /// A relay that does not trust APNs' certificate, and the simulator it points at.
    func untrustingRelay(caFile: String) throws -> (PushFixture, RelayProcess) {
        let fixture = try PushFixture()
        try String(contentsOfFile: TestPKI.shared.otherCAFile, encoding: .utf8).write(
            toFile: caFile, atomically: false, encoding: .utf8)
        let origin = "https://127.0.0.1:\(fixture.simulator.port)"
        let relay = try RelayProcess(
            config: RelayProcess.config(
                extra: ResilienceTests.generousLimits,
                apns: #""sandbox_origin":"\#(origin)","ca_file":"\#(caFile)","timeout_ms":2000"#),
            secrets: fixture.secrets)
        return (fixture, relay)
    }

    /// The status of one push for a fresh token through `relay` (`fixture` only mints the grant on its connection).
    func push(_ fixture: PushFixture, _ relay: RelayProcess) throws -> Int {
        let connection = try relay.connect()
        let grant = try fixture.grant(token: randomToken(), on: connection)
        return try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: grant)).status
    }

    func lines(_ relay: RelayProcess, _ text: String) -> [Substring] {
        relay.standardError.split(separator: "\n").filter { $0.contains(text) }
    }

    /// Pushes from `relay` fail on an untrusted APNs certificate until `fix` and SIGHUP; then they are delivered
    /// and the problem's end is logged: the problem's start and end lines, one each.
    func expectAReloadEndsTheTrustProblem(
        _ fixture: PushFixture, _ relay: RelayProcess, fix: () throws -> Void
    ) throws {
        #expect(try push(fixture, relay) == 502)
        try Poll.wait(for: "the trust problem's line", within: .seconds(10)) {
            !lines(relay, "APNs' TLS certificate is not trusted").isEmpty
        }
        try fix()
        relay.signal(SIGHUP)
        try Poll.wait(for: "one reloaded line", within: .seconds(15)) { reloadedLines(relay).count == 1 }
        #expect(try push(fixture, relay) == 200)
        #expect(fixture.waitForDeliveries(1).count == 1)
        try Poll.wait(for: "the resolved line", within: .seconds(10)) {
            !lines(relay, "resolved: APNs' TLS certificate is not trusted").isEmpty
        }
        #expect(lines(relay, "APNs' TLS certificate is not trusted").count == 2, "\(relay.standardError)")
        #expect(lines(relay, "resolved: ").count == 1, "\(relay.standardError)")
    }

    /// The CA file replaced in place (same path) and SIGHUP: the relay trusts the new CA (a path that stays the same
    /// is no reason to keep the old trust), and says that the trust problem is resolved.
    @Test func aCAFileReplacedInPlaceIsReadAgainOnSIGHUP() throws {
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let caFile = directory.appendingPathComponent("apns-ca.pem").path
        let (fixture, relay) = try untrustingRelay(caFile: caFile)
        try expectAReloadEndsTheTrustProblem(fixture, relay) {
            try String(contentsOfFile: TestPKI.shared.caFile, encoding: .utf8).write(
                toFile: caFile, atomically: false, encoding: .utf8)
        }
    }

    /// A trust problem ended by a reload to another CA file is said to be resolved, once (the new gateway's
    /// connections report to the log that saw the problem).
    @Test func aTrustProblemFixedByAReloadLogsItsResolvedLine() throws {
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let wrong = directory.appendingPathComponent("wrong-ca.pem").path
        let (fixture, relay) = try untrustingRelay(caFile: wrong)
        try expectAReloadEndsTheTrustProblem(fixture, relay) {
            let path = relay.directory.appendingPathComponent("relay.json").path
            let config = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(
                of: wrong, with: TestPKI.shared.caFile)
            try config.write(toFile: path, atomically: true, encoding: .utf8)
        }
    }
}
