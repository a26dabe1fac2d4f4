import Foundation
import Testing

/// The command line as docs/DESIGN.md, "Commands", states it: the version, `--help` for every command on
/// standard output with exit 0, and the usage on standard error with exit 64 for a usage error.
@Suite struct CommandLineTests {
    func run(_ arguments: [String], environment: [String: String] = [:]) throws -> CommandRun {
        try CommandRun.run(arguments, environment: environment)
    }

    /// `duo-relay <version>`: a release number, with `+<commit>` when built from git.
    static var versionLine: Regex<(Substring, Substring, Substring?, Substring?)> {
        #/duo-relay (\d+\.\d+\.\d+(\+[0-9a-f]{7,40}(\.dirty)?)?)/#
    }

    @Test(arguments: [["--version"], ["version"]])
    func versionIsPrinted(_ arguments: [String]) throws {
        let result = try run(arguments)
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty)
        let line = result.standardOutput.trimmingCharacters(in: .newlines)
        #expect(line.wholeMatch(of: Self.versionLine) != nil, "\(line)")
    }

    /// The start-up summary, `check`'s summary and the metrics carry the version `--version` prints.
    @Test func theSameVersionEverywhere() throws {
        let printed = try run(["--version"]).standardOutput.trimmingCharacters(in: .newlines)
        let version = try #require(printed.wholeMatch(of: Self.versionLine)).1
        let (metrics, fixture) = try MetricsExpositionTests.scrapeBothEnvironments()
        #expect(fixture.relay.standardError.contains("duo-relay: version: \(version)\n"))
        #expect(metrics.contains(#"duo_relay_build_info{version="\#(version)"} 1"# + "\n"))
        let config = fixture.relay.directory.appendingPathComponent("relay.json").path
        let check = try run(["check", "--config", config], environment: fixture.secrets.environment)
        #expect(check.standardOutput.contains("version: \(version)\n"), "\(check.standardOutput)")
    }

    @Test(arguments: ["serve", "check", "keygen", "grant-info"])
    func everyCommandAnswersHelp(_ command: String) throws {
        for flag in ["--help", "-h"] {
            let result = try run([command, flag])
            #expect(result.status == 0, "\(command) \(flag): \(result.standardError)")
            #expect(result.standardOutput.hasPrefix("usage: duo-relay \(command)"), "\(result.standardOutput)")
            #expect(result.standardError.isEmpty)
        }
        // Beside other options too: help wins, nothing runs.
        let result = try run([command, "--config", "/nonexistent", "--help"])
        #expect(result.status == 0)
    }

    @Test func keygenDocumentsItsDefaultID() throws {
        let help = try run(["keygen", "--help"]).standardOutput
        #expect(help.contains("without --id the id is 1"))
    }

    @Test func noCommandPrintsTheUsageAsAUsageError() throws {
        let result = try run([])
        #expect(result.status == 64)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains("usage: duo-relay <command>"))
        for command in ["serve", "check", "keygen", "version"] { #expect(result.standardError.contains(command)) }
        let unknown = try run(["nonsense"])
        #expect(unknown.status == 64)
        #expect(unknown.standardOutput.isEmpty)
    }

    /// `version --help` is help, not the version.
    @Test(arguments: [["version", "--help"], ["--version", "--help"], ["version", "-h"]])
    func versionAnswersHelp(_ arguments: [String]) throws {
        let result = try run(arguments)
        #expect(result.status == 0)
        #expect(result.standardOutput.hasPrefix("usage: duo-relay version"), "\(result.standardOutput)")
        #expect(result.standardOutput.trimmingCharacters(in: .newlines).wholeMatch(of: Self.versionLine) == nil)
    }

    /// `--name=value` is read as `--name value` (`keygen --id=3` too).
    @Test(arguments: [["keygen", "--id=3"], ["keygen", "--id", "3"]])
    func keygenTakesItsIDEitherWay(_ arguments: [String]) throws {
        let result = try run(arguments)
        #expect(result.status == 0, "\(result.output)")
        #expect(result.standardOutput.wholeMatch(of: #/\{"3":"[A-Za-z0-9_-]{43}"\}\n/#) != nil, "\(result.output)")
    }

    /// `keygen --merge` adds a fresh key to the relay keys a file or standard input holds, printing the new
    /// RELAY_KEYS, and refuses an id already there or keys that are not RELAY_KEYS, naming no key.
    @Test func keygenMergesIntoRelayKeys() throws {
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("RELAY_KEYS").path
        let first = try run(["keygen", "--id", "1"]).standardOutput
        try first.write(toFile: file, atomically: true, encoding: .utf8)
        let oldKey = try #require(first.firstMatch(of: #/"1":"([^"]+)"/#)).1

        let merged = try run(["keygen", "--id=2", "--merge", file])
        #expect(merged.status == 0, "\(merged.output)")
        let keys = try #require(
            JSONSerialization.jsonObject(with: Data(merged.standardOutput.utf8)) as? [String: String])
        #expect(keys.keys.sorted() == ["1", "2"])
        #expect(keys["1"].map { Substring($0) } == oldKey)
        #expect(keys["2"]?.count == 43)

        // From standard input, as for a variable: printf '%s' "$RELAY_KEYS" | duo-relay keygen --id 3 --merge -
        let shell = try CommandRun.run(
            ["/bin/sh", "-c", #"printf '%s' "$RELAY_KEYS" | "$DUO_RELAY" keygen --id 3 --merge -"#],
            shell: ["RELAY_KEYS": merged.standardOutput, "DUO_RELAY": RelayProcess.binary.path])
        #expect(shell.status == 0, "\(shell.output)")
        let three = try #require(
            JSONSerialization.jsonObject(with: Data(shell.standardOutput.utf8)) as? [String: String])
        #expect(three.keys.sorted() == ["1", "2", "3"])

        let taken = try run(["keygen", "--id", "1", "--merge", file])
        #expect(taken.status == 1)
        #expect(taken.standardOutput.isEmpty)
        #expect(taken.standardError.contains("RELAY_KEYS: already holds key 1"), "\(taken.output)")
        #expect(!taken.output.contains(oldKey))
        try #"{"1":"\#(oldKey)","#.write(toFile: file, atomically: true, encoding: .utf8)
        let broken = try run(["keygen", "--id", "2", "--merge", file])
        #expect(broken.status == 1)
        #expect(broken.standardError.contains("RELAY_KEYS: is not JSON"), "\(broken.output)")
        #expect(!broken.output.contains(oldKey))
        #expect(try run(["keygen", "--merge", directory.appendingPathComponent("none").path]).status == 1)
        let help = try run(["keygen", "--help"]).standardOutput
        #expect(help.contains("--merge FILE"))
    }

    /// `serve --help` names every secret it reads and sends nobody to a document the repository does not hold.
    @Test func serveHelpNamesEverySecretAndOnlyDocumentsThatExist() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let serve = try run(["serve", "--help"]).standardOutput
        for name in [
            "APNS_KEY_SANDBOX", "APNS_KEY_ID_SANDBOX", "APNS_KEY_PRODUCTION", "APNS_KEY_ID_PRODUCTION", "APNS_TEAM_ID",
            "RELAY_KEYS", "REDIS_PASSWORD", "APNS_PKCS11_PIN",
        ] {
            #expect(serve.contains(name), "serve --help lacks \(name)")
        }
        for command in ["serve", "check", "keygen", "dev", "apns-sim", "push", "version"] {
            let help = try run([command, "--help"]).standardOutput
            for document in help.matches(of: #/[A-Z][A-Za-z_]+\.md/#).map({ String($0.output) }) {
                #expect(
                    FileManager.default.fileExists(atPath: root.appendingPathComponent(document).path),
                    "\(command) --help names \(document), which the repository does not hold")
            }
        }
    }

    /// A hint a command prints runs as printed where `duo-relay` is not on PATH (after scripts/dev): it names
    /// the running binary by its path.
    @Test func theKeygenHintRunsAsPrinted() throws {
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = directory.appendingPathComponent("relay.json").path
        try RelayProcess.config().write(toFile: config, atomically: true, encoding: .utf8)
        let check = try run(["check", "--config", config])
        let hint = try #require(check.standardError.firstMatch(of: #/RELAY_KEYS: is not set[^`]*run `([^`]+)`/#)).1
        #expect(hint.hasPrefix("/"), "\(hint)")
        let made = try CommandRun.run(["/bin/sh", "-c", String(hint)], shell: [:])
        #expect(made.status == 0, "\(made.output)")
        #expect(made.standardOutput.hasPrefix(#"{"1":""#))
    }
}
