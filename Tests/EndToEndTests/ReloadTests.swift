import Foundation
import RelayTestSupport
import Testing

/// SIGHUP says, in its `reloaded: …` line, which changed settings it did not apply (issue 14).
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
}
