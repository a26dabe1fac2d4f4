import ErrorCodes
import RelayServer
import RelayVersion

/// Exit codes: 0 success, 1 a configuration or runtime problem, 64 a usage error.
enum Usage {
    static let text = """
        usage: duo-relay <command> [options]

          serve --config FILE     run the relay (secrets come from the environment)
          check --config FILE [--credentials-dir DIR]
                                  dry run before a deploy: validate configuration and secrets,
                                  reporting every problem (DIR: systemd credentials to read)
          keygen [--id N] [--merge FILE]
                                  print a fresh relay key for RELAY_KEYS (--merge: added to FILE's keys)
          grant-info [--config FILE]
                                  read a grant on standard input: its version, key id and (with
                                  RELAY_KEYS) environment, issue time and expiry; never the token
          dev [--port N]          relay plus APNs simulator on loopback with throwaway keys (dev --help)
          apns-sim [options]      the APNs simulator alone (duo-relay apns-sim --help)
          push --relay URL --grant G [--ca-file FILE]
                                  send one test push through a relay, as a channel would
          version, --version      print the version

        Every command answers --help. An option's value may also follow an equals sign (--id=3).
        """

    static func print() -> Int32 {
        Output.standard(text)
        return 0
    }

    static let versionHelp = """
        usage: duo-relay version (or duo-relay --version)

        Prints duo-relay <version>: the release, with +<commit> when built from git (.dirty when the
        tree had changes). The start-up summary (version: ...) and the metrics
        (duo_relay_build_info{version="..."} 1) carry the same.
        """

    /// `duo-relay --version` and `duo-relay version`: the version, or its help; nothing else is an option.
    static func version(_ arguments: [String]) -> Int32 {
        if wantsHelp(arguments) { return help(versionHelp) }
        guard arguments.isEmpty else { return fail("version takes no option") }
        return printVersion()
    }

    /// `duo-relay --version` and `duo-relay version`.
    static func printVersion() -> Int32 {
        Output.standard("duo-relay " + RelayVersion.text)
        return 0
    }

    /// `duo-relay` with no command: the usage, on standard error, as a usage error.
    static func failWithUsage() -> Int32 {
        Output.error(text)
        return 64
    }

    /// Whether a command was asked for its help (`--help` or `-h` anywhere among its arguments).
    static func wantsHelp(_ arguments: [String]) -> Bool {
        arguments.contains("--help") || arguments.contains("-h")
    }

    /// A command's help, on standard output, exit 0.
    static func help(_ text: String) -> Int32 {
        Output.standard(text)
        return 0
    }

    static func fail(_ problem: String) -> Int32 {
        // The answer to a person at a terminal, not a log line: no time, no level
        // (docs/operations/monitoring.md, "Logs").
        Output.error("duo-relay: " + problem + "\nrun `\(Invocation.command) help` for the commands")
        return 64
    }

    /// The arguments with each `--name=value` written as `--name value`, as the options are read.
    static func splittingEquals(_ arguments: [String]) -> [String] {
        arguments.flatMap { argument -> [String] in
            guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return [argument] }
            return [String(argument[..<equals]), String(argument[argument.index(after: equals)...])]
        }
    }

    /// The value after `--name`, if given; `nil` when absent; throws when it lacks a value.
    static func option(_ name: String, in arguments: [String]) throws(UsageError) -> String? {
        guard let index = arguments.firstIndex(of: name) else { return nil }
        guard index + 1 < arguments.count, !arguments[index + 1].hasPrefix("--") else {
            throw UsageError(problem: "\(name) needs a value")
        }
        return arguments[index + 1]
    }

    /// Rejects anything but the known options (each followed by a value).
    static func check(_ arguments: [String], allowed: Set<String>) throws(UsageError) {
        var index = 0
        while index < arguments.count {
            guard allowed.contains(arguments[index]) else {
                throw UsageError(problem: "unknown option '\(arguments[index].prefix(40))'")
            }
            index += 2
        }
    }
}

/// A command line that cannot be run: `problem` is printed with the usage, and the exit status is 64.
struct UsageError: CodedError {
    let problem: String
    var code: ErrorCode<UsageError> { ErrorCode("usage") }
    var reason: String { problem }
}
