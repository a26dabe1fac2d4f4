import RelayCore
import RelayServer
import RelayVersion

/// `duo-relay check --config FILE`: validates everything `serve` would, prints a summary with no
/// secret in it, and exits non-zero on any problem.
enum CheckCommand {
    static let help = """
        usage: duo-relay check --config FILE

        The dry run before every deploy: reads the configuration and the secrets exactly as serve
        does, checks everything serve would refuse at start (keys parse, ids well-formed, the largest
        notification fits, a provider token can be signed, apns.ca_file loads), and prints a summary
        with no secret in it.

        Exit status: 0 check: ok, 1 a problem (named on standard error), 64 a usage error.
        """

    static func run(_ arguments: [String]) -> Int32 {
        if Usage.wantsHelp(arguments) { return Usage.help(help) }
        switch SetupLoader.loadOrReport(arguments, prefix: "check failed") {
        case .success(let setup):
            do {
                try Relay.preflight(setup)
            } catch {
                Log.line("check failed: \(error)")
                return 1
            }
            Output.standard(
                (["version: \(RelayVersion.text)"] + setup.summary).joined(separator: "\n") + "\ncheck: ok")
            return 0
        case .failure(let exit):
            return exit.status
        }
    }
}
