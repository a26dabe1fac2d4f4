import ErrorCodes
import Foundation
import RelayCore
import RelayServer

/// Reads `--config FILE` and the secrets from the environment, as `serve` and `check` do.
enum SetupLoader {
    /// Where a command finds its configuration and secrets.
    struct Sources {
        var configPath: String
        /// `check --credentials-dir DIR`: the systemd credentials directory to read, in place of
        /// `$CREDENTIALS_DIRECTORY`.
        var credentialsDirectory: String?
        /// The command takes `--credentials-dir` (`check`): its hints may name it.
        var offersCredentialsDirectory = false
    }

    /// `--config FILE` (required) and, if `allowsCredentialsDirectory`, `--credentials-dir DIR`.
    static func sources(_ arguments: [String], allowsCredentialsDirectory: Bool = false) throws(UsageError) -> Sources {
        try Usage.check(
            arguments, allowed: allowsCredentialsDirectory ? ["--config", "--credentials-dir"] : ["--config"])
        guard let path = try Usage.option("--config", in: arguments) else {
            throw UsageError(problem: "--config FILE is required (the path is never guessed)")
        }
        return Sources(
            configPath: path, credentialsDirectory: try Usage.option("--credentials-dir", in: arguments),
            offersCredentialsDirectory: allowsCredentialsDirectory)
    }

    /// Every problem of the configuration file and the secrets, as `check` reports them.
    static func check(_ sources: Sources) -> RelaySetup.Check {
        let checked = checkFiles(sources)
        guard sources.offersCredentialsDirectory else { return checked }
        return RelaySetup.Check(
            setup: checked.setup, configuration: checked.configuration, environments: checked.environments,
            problems: checked.problems.map {
                withCredentialsHint($0, secrets: environmentSecrets(credentialsDirectory: sources.credentialsDirectory))
            })
    }

    /// `RELAY_KEYS` missing where no APNs key is given either, and no credentials directory is read: most likely
    /// `check` runs by hand without the secrets a systemd unit loads as credentials, and the fix is
    /// `--credentials-dir`, not a new key. The problem then says both.
    static func withCredentialsHint(_ problem: ConfigurationError, secrets: SecretSource) -> ConfigurationError {
        func absent(_ name: String) -> Bool {
            do { return try secrets.value(name) == nil } catch { return false }
        }
        guard problem.code == .missing, problem.subject == "RELAY_KEYS",
            (secrets.environment["CREDENTIALS_DIRECTORY"] ?? "").isEmpty,
            APNsEnvironment.allCases.allSatisfy({ absent("APNS_KEY_" + $0.variableSuffix) })
        else { return problem }
        return ConfigurationError(
            .missing, "RELAY_KEYS",
            "is not set, and no APNs key is either: to check the secrets a systemd unit loads as credentials, give "
                + "--credentials-dir DIR (the directory its LoadCredential= lines read from); for a first relay key, "
                + "run `\(Invocation.command) keygen`")
    }

    private static func checkFiles(_ sources: Sources) -> RelaySetup.Check {
        let secrets = environmentSecrets(credentialsDirectory: sources.credentialsDirectory)
        var problems: [ConfigurationError] = []
        if let directory = sources.credentialsDirectory {
            var isDirectory: ObjCBool = false
            if !FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) || !isDirectory.boolValue
                || !FileManager.default.isReadableFile(atPath: directory)
            {
                problems.append(
                    ConfigurationError(.unreadable, "--credentials-dir", "names no directory that can be read"))
            }
        }
        guard let data = FileManager.default.contents(atPath: sources.configPath) else {
            let loaded = RelaySecrets.check(from: secrets, keygen: Invocation.command + " keygen")
            return RelaySetup.Check(
                setup: nil, configuration: nil, environments: loaded.environments,
                problems: problems + [ConfigurationError(.unreadable, sources.configPath, "cannot be read")]
                    + loaded.problems)
        }
        let checked = RelaySetup.check(
            configuration: Array(data), secrets: secrets, keygen: Invocation.command + " keygen",
            tokens: TokenKeys.opener)
        guard !problems.isEmpty else { return checked }
        return RelaySetup.Check(
            setup: nil, configuration: checked.configuration, environments: checked.environments,
            problems: problems + checked.problems)
    }

    static func load(_ arguments: [String]) throws(UsageError) -> Result<RelaySetup, ConfigurationProblems> {
        let checked = check(try sources(arguments))
        if let setup = checked.setup { return .success(setup) }
        return .failure(ConfigurationProblems(checked.problems)!)
    }

    /// Loads as `load` does, reporting each problem in one line (`prefix: problem`) and giving the
    /// exit code instead of a setup: 64 for usage, 1 for configuration.
    /// Lines are written in the configuration's `log.format` as soon as the file could be read.
    static func loadOrReport(_ arguments: [String], prefix: String) -> Result<RelaySetup, ExitCode> {
        do {
            let checked = check(try sources(arguments))
            if let configuration = checked.configuration { Log.use(configuration.logFormat) }
            if let setup = checked.setup { return .success(setup) }
            for problem in ConfigurationProblems(checked.problems)?.all ?? checked.problems {
                Log.line("\(prefix): \(problem)", level: .error, event: "configuration_problem")
            }
            return .failure(ExitCode(status: 1))
        } catch {
            return .failure(ExitCode(status: Usage.fail(error.problem)))
        }
    }

    static func environmentSecrets(credentialsDirectory: String? = nil) -> SecretSource {
        var environment = ProcessInfo.processInfo.environment
        if let credentialsDirectory { environment["CREDENTIALS_DIRECTORY"] = credentialsDirectory }
        return SecretSource(
            environment: environment,
            entryExists: { path in
                // lstat, not stat: a dangling link exists (and cannot be read).
                var status = stat()
                return lstat(path, &status) == 0
            },
            readFile: { path in try String(contentsOfFile: path, encoding: .utf8) })
    }
}

/// A process exit status, as the failure of a command step.
struct ExitCode: CodedError {
    let status: Int32
    var code: ErrorCode<ExitCode> { ErrorCode("exit_status") }
    var reason: String { "exit status \(status)" }
}
