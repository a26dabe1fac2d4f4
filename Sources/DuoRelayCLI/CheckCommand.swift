import RelayCore
import RelayServer

/// `duo-relay check --config FILE`: validates everything `serve` would, prints a summary with no
/// secret in it, and exits non-zero on any problem.
enum CheckCommand {
    static func run(_ arguments: [String]) -> Int32 {
        switch SetupLoader.loadOrReport(arguments, prefix: "check failed") {
        case .success(let setup):
            Output.standard(setup.summary.joined(separator: "\n") + "\ncheck: ok")
            return 0
        case .failure(let exit):
            return exit.status
        }
    }
}
