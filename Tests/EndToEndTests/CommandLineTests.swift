import Foundation
import Testing

/// The command line as DESIGN.md, "Commands", states it (issue 14): the version, `--help` for every command on
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

    @Test(arguments: ["serve", "check", "keygen"])
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
}
