import Foundation
import RelayCore

/// `duo-relay grant-info [--config FILE]`: what a support question about one grant needs (which relay key sealed
/// it, for which environment, when it expires), from the grant on standard input; never the device token.
enum GrantInfoCommand {
    static var help: String {
        """
        usage: duo-relay grant-info [--config FILE] < GRANT

        Reads one grant on standard input and prints its version and the id of the relay key that
        sealed it. With RELAY_KEYS (a variable, RELAY_KEYS_FILE or a systemd credential, as serve
        reads it) it also opens the grant and prints its environment, when it was issued and when it
        expires, or why it does not open (no such key id, another key with that id, not a grant).
        Never the device token.

          --config FILE   the relay's configuration: its grant_lifetime_s gives the expiry (without
                          it, the default, 2592000 s: 30 days)

        For example:
          printf '%s' "$GRANT" | duo-relay grant-info --config /etc/duo-relay/relay.json

        Exit status: 0 the grant opened (or, without RELAY_KEYS, its header reads), 1 it does not
        open, is not a grant, or FILE or RELAY_KEYS cannot be read (named on standard error, never
        a key), 64 a usage error.
        """
    }

    static func run(_ arguments: [String]) -> Int32 {
        if Usage.wantsHelp(arguments) { return Usage.help(help) }
        let configPath: String?
        do throws(UsageError) {
            try Usage.check(arguments, allowed: ["--config"])
            configPath = try Usage.option("--config", in: arguments)
        } catch {
            return Usage.fail(error.problem)
        }
        var lifetime = RelayConfiguration().grantLifetimeSeconds
        var lifetimeSource = "the default; --config FILE gives the relay's"
        if let configPath {
            guard let data = FileManager.default.contents(atPath: configPath) else {
                Output.error("duo-relay grant-info: --config: \(configPath) cannot be read")
                return 1
            }
            do {
                lifetime = try RelayConfiguration.parse(Array(data)).grantLifetimeSeconds
                lifetimeSource = "grant_lifetime_s of \(configPath)"
            } catch {
                Output.error("duo-relay grant-info: --config: \(error)")
                return 1
            }
        }
        let keys: RelayKeys?
        do {
            keys = try SetupLoader.environmentSecrets().value("RELAY_KEYS").map { text throws(ConfigurationError) in
                try RelaySecrets.parseRelayKeys(text, keygen: Invocation.command + " keygen")
            }
        } catch {
            Output.error("duo-relay grant-info: \(error)")
            return 1
        }
        let text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        let inspection = GrantInspection(
            text, keys: keys, lifetime: lifetime, lifetimeSource: lifetimeSource,
            now: UInt64(Date().timeIntervalSince1970))
        Output.standard(inspection.lines.joined(separator: "\n"))
        return inspection.isReadable ? 0 : 1
    }
}
