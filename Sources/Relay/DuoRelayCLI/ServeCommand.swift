import Foundation
import RelayCore
import RelayServer
import RelayVersion

/// `duo-relay serve --config FILE`: runs the relay until SIGTERM or SIGINT.
enum ServeCommand {
    static var help: String {
        """
        usage: duo-relay serve --config FILE

        Runs the relay until SIGTERM or SIGINT (then stops gracefully, exit 0). SIGHUP re-reads the
        configuration file, the tls certificate and key files, and the secrets given as NAME_FILE
        (variables and credentials keep their start-up values); listen, limits and server settings need a restart. The path is always
        explicit: nothing is searched for. Secrets come from the environment (docs/operations/configuration.md, "Secrets"):
        APNS_KEY_SANDBOX, APNS_KEY_ID_SANDBOX, APNS_KEY_PRODUCTION, APNS_KEY_ID_PRODUCTION,
        APNS_TEAM_ID, RELAY_KEYS and, with a Redis limits store that requires AUTH, REDIS_PASSWORD
        (and REDIS_SENTINEL_PASSWORD for sentinels that require it), and APNS_PKCS11_PIN when an APNs key
        is a pkcs11: URI naming a key in a hardware token (with apns.pkcs11_module); each also as NAME_FILE
        (a path) or as a systemd credential NAME ($CREDENTIALS_DIRECTORY/NAME).
        Run \(Invocation.command) check --config FILE first: it reports every problem serve would meet.

        Exit status: 0 stopped by a signal, 1 a configuration or start-up problem, 64 a usage error.
        """
    }

    static func run(_ arguments: [String]) -> Int32 {
        if Usage.wantsHelp(arguments) { return Usage.help(help) }
        // Before anything is read: a reload asked for while the relay starts is kept, not fatal.
        Relay.catchEarlyReloads()
        switch SetupLoader.loadOrReport(arguments, prefix: "duo-relay") {
        case .success(let setup):
            return serve(setup) {
                (try? SetupLoader.load(arguments))?.mapError(\.first)
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
            Log.line("cannot start: \(error)", level: .error, event: "start_refused")
            return 1
        }
        Log.line("version: \(RelayVersion.text)", event: "version", fields: ["version": RelayVersion.text])
        for line in setup.summary { Log.line(line, event: "summary") }
        if let note = RelaySetup.unusedProxyVariableNote(
            setup.configuration, environment: ProcessInfo.processInfo.environment)
        {
            Log.line("note: " + note, level: .warning, event: "note")
        }
        Log.line("memory allocator: \(Allocator.name)", event: "allocator")
        var listen = setup.configuration.listen
        listen.port = relay.port
        Log.line(relay.tlsSummary, event: "tls")
        // The same words with TLS or without (tools read the port from it); the `tls` line says which.
        Log.line("listening on \(listen)", event: "listening", fields: ["address": "\(listen)"])
        if var metrics = setup.configuration.metricsListen, let port = relay.metricsPort {
            metrics.port = port
            Log.line(
                "metrics on http://\(metrics)/metrics", event: "metrics_listening", fields: ["address": "\(metrics)"])
        }
        relay.runUntilSignalled()
        let counts = relay.counts.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        Log.line(
            "stopped; " + (counts.isEmpty ? "no requests" : counts.joined(separator: " ")), event: "stopped",
            fields: ["answers": counts.joined(separator: " ")])
        return 0
    }
}
