import RelayCore
import RelayServer

/// `duo-relay check --config FILE`: validates everything `serve` would, prints a summary with no
/// secret in it, and exits non-zero on any problem.
enum CheckCommand {
    static func run(_ arguments: [String]) -> Int32 {
        let loaded: Result<RelaySetup, ConfigurationError>
        do {
            loaded = try SetupLoader.load(arguments)
        } catch {
            return Usage.fail(error.problem)
        }
        switch loaded {
        case .success(let setup):
            Output.standard(setup.summary.joined(separator: "\n") + "\ncheck: ok")
            return 0
        case .failure(let error):
            Log.line("check failed: \(error)")
            return 1
        }
    }
}
