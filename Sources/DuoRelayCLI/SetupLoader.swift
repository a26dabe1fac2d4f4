import Foundation
import RelayCore
import RelayServer

/// Reads `--config FILE` and the secrets from the environment, as `serve` and `check` do.
enum SetupLoader {
    static func load(_ arguments: [String]) throws(UsageError) -> Result<RelaySetup, ConfigurationError> {
        try Usage.check(arguments, allowed: ["--config"])
        guard let path = try Usage.option("--config", in: arguments) else {
            throw UsageError(problem: "--config FILE is required (the path is never guessed)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(ConfigurationError(.unreadable, path, "cannot be read"))
        }
        do {
            let configuration = try RelayConfiguration.parse(Array(data))
            let secrets = try RelaySecrets.load(from: environmentSecrets())
            return .success(try RelaySetup(configuration: configuration, secrets: secrets))
        } catch {
            return .failure(error)
        }
    }

    /// Loads as `load` does, reporting a problem in one line (`prefix: problem`) and giving the
    /// exit code instead of a setup: 64 for usage, 1 for configuration.
    static func loadOrReport(_ arguments: [String], prefix: String) -> Result<RelaySetup, ExitCode> {
        do {
            switch try load(arguments) {
            case .success(let setup): return .success(setup)
            case .failure(let error):
                Log.line("\(prefix): \(error)")
                return .failure(ExitCode(status: 1))
            }
        } catch {
            return .failure(ExitCode(status: Usage.fail(error.problem)))
        }
    }

    static func environmentSecrets() -> SecretSource {
        SecretSource(
            environment: ProcessInfo.processInfo.environment,
            entryExists: { path in
                // lstat, not stat: a dangling link exists (and cannot be read).
                var status = stat()
                return lstat(path, &status) == 0
            },
            readFile: { path in try String(contentsOfFile: path, encoding: .utf8) })
    }
}

/// A process exit status, as the failure of a command step.
struct ExitCode: Error {
    let status: Int32
}
