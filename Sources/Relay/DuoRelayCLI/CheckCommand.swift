import Foundation
import RelayCore
import RelayServer
import RelayVersion

/// `duo-relay check --config FILE [--credentials-dir DIR]`: validates everything `serve` would, prints a summary
/// with no secret in it, and exits non-zero on any problem, each on a line of its own.
enum CheckCommand {
    static let help = """
        usage: duo-relay check --config FILE [--credentials-dir DIR]

        The dry run before every deploy: reads the configuration and the secrets exactly as serve
        does, checks everything serve would refuse at start (keys parse, ids well-formed, the largest
        notification fits, a provider token can be signed, apns.ca_file loads, the tls pair loads, matches,
        has not expired and its key file is not readable by every user), and prints a summary
        with no secret in it. Every problem found is reported, one line each on standard error
        ("check failed: KEY: problem"), naming the configuration key or variable at fault and never
        a secret's value. A tls certificate that expires within 14 days is a warning, not a problem.

          --config FILE          the configuration file serve will run
          --credentials-dir DIR  read systemd credentials from DIR (a file per secret, named as its
                                 variable: DIR/RELAY_KEYS, DIR/APNS_KEY_PRODUCTION, ...) in place of
                                 $CREDENTIALS_DIRECTORY: the directory a unit's LoadCredential= lines
                                 load from, to check by hand what the service will see at its next start

        Exit status: 0 check: ok, 1 a problem (each named on standard error), 64 a usage error.
        """

    static func run(_ arguments: [String]) -> Int32 {
        if Usage.wantsHelp(arguments) { return Usage.help(help) }
        let sources: SetupLoader.Sources
        do throws(UsageError) {
            sources = try SetupLoader.sources(arguments, allowsCredentialsDirectory: true)
        } catch {
            return Usage.fail(error.problem)
        }
        let checked = SetupLoader.check(sources)
        if let configuration = checked.configuration { Log.use(configuration.logFormat) }
        var problems = checked.problems
        // The APNs and Redis clients are set up as serve sets them up, whatever else is wrong, for each
        // environment whose key loaded.
        if let configuration = checked.configuration {
            let preflight = Relay.preflight(
                configuration, environments: checked.environments,
                redisPassword: checked.setup?.secrets.redisPassword)
            problems += preflight.filter { !problems.contains($0) }
        }
        // The pair serve would load: readable, parses, matches, not expired, a key file only its owner reads.
        var tlsLines: [String] = []
        if let files = checked.configuration?.tls {
            let now = Int64(Date().timeIntervalSince1970)
            do throws(ConfigurationError) {
                let context = try FrontCertificate.load(files, now: now)
                let (summary, warning) = FrontCertificate.describe(context.leaf, now: now)
                tlsLines.append(summary)
                if let warning { Log.line("check: warning: " + warning) }
            } catch {
                if !problems.contains(error) { problems.append(error) }
            }
        }
        if let configuration = checked.configuration,
            let note = RelaySetup.unusedProxyVariableNote(
                configuration, environment: ProcessInfo.processInfo.environment)
        {
            Log.line("check: note: " + note, level: .warning, event: "check_note")
        }
        guard let setup = checked.setup, problems.isEmpty else {
            for problem in problems { Log.line("check failed: \(problem)", level: .error, event: "check_failed") }
            return 1
        }
        Output.standard(
            (["version: \(RelayVersion.text)"] + setup.summary + tlsLines).joined(separator: "\n") + "\ncheck: ok")
        return 0
    }
}
