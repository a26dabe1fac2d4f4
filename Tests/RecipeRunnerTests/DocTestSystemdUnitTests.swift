import Foundation
import Glibc
import Testing

@testable import RecipeRunner

@Suite struct DocTestSystemdUnitTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// The unit that OPERATIONS.md installs: what the stand-in does for it.
    @Test func readsTheInstalledUnitsStartReloadAndStop() throws {
        let unit = SystemdUnit(
            try String(contentsOfFile: Self.root + "/deploy/systemd/duo-relay.service", encoding: .utf8))
        #expect(unit.values("ExecStartPre") == ["/usr/local/bin/duo-relay check --config /etc/duo-relay/relay.json"])
        #expect(unit.start == ["/usr/local/bin/duo-relay", "serve", "--config", "/etc/duo-relay/relay.json"])
        #expect(
            unit.values("ExecReload") == [
                "/usr/local/bin/duo-relay check --config /etc/duo-relay/relay.json", "/bin/kill -HUP $MAINPID",
            ])
        #expect(unit.killSignal == SIGTERM)
        #expect(unit.values("EnvironmentFile") == ["/etc/duo-relay/relay.env"])
        // The commented-out credentials are none.
        #expect(unit.credentials.map(\.name) == ["RELAY_KEYS", "APNS_KEY_PRODUCTION"])
        #expect(
            unit.credentials.map(\.path) == [
                "/etc/duo-relay/credentials/RELAY_KEYS", "/etc/duo-relay/credentials/APNS_KEY_PRODUCTION",
            ])
    }

    @Test func aSignalItDoesNotKnowIsNone() {
        #expect(SystemdUnit("KillSignal=SIGINT\n").killSignal == SIGINT)
        #expect(SystemdUnit("[Service]\n").killSignal == SIGTERM)
        #expect(SystemdUnit("KillSignal=SIGWINCH\n").killSignal == nil)
    }

    @Test func readsAnEnvironmentFile() throws {
        let shipped = SystemdUnit.environment(
            try String(contentsOfFile: Self.root + "/deploy/systemd/relay.env", encoding: .utf8))
        #expect(shipped == ["APNS_TEAM_ID": "REPLACE_ME", "APNS_KEY_ID_PRODUCTION": "REPLACE_ME"])
        let text = "# comment\n; another\n  A=1\nB=\"two words\"\nC='x'\nD=\n\nnot a variable\n"
        #expect(SystemdUnit.environment(text) == ["A": "1", "B": "two words", "C": "x", "D": ""])
    }

    /// The stand-in on a unit of its own: start copies the credentials and runs ExecStartPre then ExecStart with
    /// the environment file's variables; status says running; reload runs ExecReload with MAINPID; stop ends it.
    @Test func theStandInStartsReloadsAndStopsAUnit() throws {
        let directory = NSTemporaryDirectory() + "doc-test-systemctl-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "secret-keys".write(toFile: directory + "/keys", atomically: true, encoding: .utf8)
        try "GREETING=hello\n".write(toFile: directory + "/unit.env", atomically: true, encoding: .utf8)
        let unit = """
            [Service]
            ExecStartPre=/bin/sh -c 'echo pre $GREETING; test -r "$CREDENTIALS_DIRECTORY/KEYS"'
            ExecStart=/bin/sleep 30
            ExecReload=/bin/sh -c 'echo reload of $MAINPID'
            KillSignal=SIGTERM
            EnvironmentFile=\(directory)/unit.env
            LoadCredential=KEYS:\(directory)/keys
            """
        let service = SystemctlStandIn.Service(
            unit: SystemdUnit(unit),
            paths: SystemctlStandIn.Paths(unit: directory + "/unit", state: directory + "/state"))
        try FileManager.default.createDirectory(atPath: directory + "/state", withIntermediateDirectories: true)
        #expect(service.start() == 0)
        let pid = try #require(service.mainPID)
        #expect(ProcessTable.isRunning(pid))
        #expect(try String(contentsOfFile: directory + "/state/credentials/KEYS", encoding: .utf8) == "secret-keys")
        let mode = try FileManager.default.attributesOfItem(atPath: directory + "/state/credentials/KEYS")[
            .posixPermissions]
        #expect(mode as? Int == 0o400)
        #expect(service.runEach("ExecReload") == 0)
        #expect(service.stop() == 0)
        #expect(!ProcessTable.isRunning(pid))
        #expect(service.mainPID == nil)
        #expect(service.status() == 3)
        let journal = try String(contentsOfFile: directory + "/state/journal", encoding: .utf8)
        #expect(journal == "pre hello\nreload of \(pid)\n")
    }

    @Test func aFailingStartPreventsTheStart() throws {
        let directory = NSTemporaryDirectory() + "doc-test-systemctl-fail-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let service = SystemctlStandIn.Service(
            unit: SystemdUnit("ExecStartPre=/bin/false\nExecStart=/bin/sleep 30\n"),
            paths: SystemctlStandIn.Paths(unit: directory + "/unit", state: directory))
        #expect(service.start() == 1)
        #expect(service.mainPID == nil)
    }
}
