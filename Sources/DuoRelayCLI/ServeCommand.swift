import RelayCore
import RelayServer

/// `duo-relay serve --config FILE`: runs the relay until SIGTERM or SIGINT.
enum ServeCommand {
    static func run(_ arguments: [String]) -> Int32 {
        switch SetupLoader.loadOrReport(arguments, prefix: "duo-relay") {
        case .success(let setup):
            return serve(setup) {
                (try? SetupLoader.load(arguments))
                    ?? .failure(ConfigurationError(.invalid, "arguments", "cannot be read again"))
            }
        case .failure(let exit):
            return exit.status
        }
    }

    static func serve(
        _ setup: RelaySetup, reload: @escaping @Sendable () -> Result<RelaySetup, ConfigurationError>
    ) -> Int32 {
        let relay: Relay
        do {
            relay = try Relay(setup: setup, reload: reload)
        } catch {
            Log.line("duo-relay: cannot start: \(error)")
            return 1
        }
        for line in setup.summary { Log.line("duo-relay: " + line) }
        Log.line("duo-relay: memory allocator: \(Allocator.name)")
        var listen = setup.configuration.listen
        listen.port = relay.port
        Log.line("duo-relay: listening on \(listen)")
        if var metrics = setup.configuration.metricsListen, let port = relay.metricsPort {
            metrics.port = port
            Log.line("duo-relay: metrics on http://\(metrics)/metrics")
        }
        relay.runUntilSignalled()
        let counts = relay.counts.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        Log.line("duo-relay: stopped; " + (counts.isEmpty ? "no requests" : counts.joined(separator: " ")))
        return 0
    }
}
