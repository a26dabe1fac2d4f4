import Foundation
import RelayTestSupport

/// One run of the `duo-relay` binary to its end (`check`, `--help`, `keygen`, `push`), with its exit
/// status and both outputs, as ``RelayProcess`` collects them.
struct CommandRun {
    let status: Int32
    let standardOutput: String
    let standardError: String
    var output: String { standardOutput + standardError }
    /// The message of each log line on standard error (``RelayProcess/logMessages``).
    var logMessages: [String] { RelayProcess.logMessages(standardError) }

    /// Runs `duo-relay <arguments>` with exactly `environment` (plus `PATH` and the sanitizer settings
    /// ``RelayProcess`` passes on). A command still running after `timeoutSeconds` gets SIGTERM; that is a
    /// test failure unless `allowingTimeout` (a `serve` that started when it should not have: its output says why).
    init(
        _ arguments: [String], environment: [String: String] = [:], timeoutSeconds: Double = 60,
        allowingTimeout: Bool = false
    ) throws {
        let run = try RelayProcess(arguments: arguments, environment: environment)
        if let status = try? run.waitForExit(timeoutSeconds: timeoutSeconds) {
            self.status = status
        } else {
            run.signal(SIGTERM)
            status = try run.waitForExit()
            if !allowingTimeout {
                throw TestFailure("duo-relay \(arguments.first ?? "") did not finish in \(timeoutSeconds) s")
            }
        }
        standardOutput = run.standardOutput
        standardError = run.standardError
    }

    /// Runs `command` (an executable's path and its arguments; a shell, for a printed command line) with exactly
    /// `environment` plus `PATH=/usr/bin:/bin`, where no `duo-relay` is.
    static func run(_ command: [String], shell environment: [String: String], timeoutSeconds: Double = 60) throws
        -> CommandRun
    {
        let run = try RelayProcess(
            arguments: Array(command.dropFirst()), environment: environment, launcher: [command[0]], direct: true)
        let status = try run.waitForExit(timeoutSeconds: timeoutSeconds)
        return CommandRun(status: status, standardOutput: run.standardOutput, standardError: run.standardError)
    }

    private init(status: Int32, standardOutput: String, standardError: String) {
        self.status = status
        self.standardOutput = standardOutput
        self.standardError = standardError
    }

    static func run(
        _ arguments: [String], environment: [String: String] = [:], timeoutSeconds: Double = 30
    ) throws -> CommandRun {
        try CommandRun(arguments, environment: environment, timeoutSeconds: timeoutSeconds, allowingTimeout: true)
    }
}
