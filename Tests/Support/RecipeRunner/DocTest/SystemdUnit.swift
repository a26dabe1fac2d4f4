import Glibc

/// What the systemctl stand-in reads in the installed unit: the `Key=value` lines of the keys systemd acts on to
/// start, reload and stop it (LoadCredential, EnvironmentFile, ExecStartPre, ExecStart, ExecReload, KillSignal).
/// Not its sandboxing (DynamicUser, ProtectSystem, the filters): systemd-analyze checks those in DeploymentTests.
struct SystemdUnit {
    /// Every `Key=value` line, in order (a comment or a section line is none).
    let entries: [(key: String, value: String)]

    init(_ text: String) {
        entries = text.split(separator: "\n").compactMap { line in
            guard let first = line.first, first.isLetter, let equals = line.firstIndex(of: "=") else { return nil }
            return (String(line[..<equals]), String(line[line.index(after: equals)...]))
        }
    }

    /// The values of `key`'s lines, in order.
    func values(_ key: String) -> [String] { entries.filter { $0.key == key }.map(\.value) }

    /// LoadCredential's credentials: the name in the credentials directory and the file copied there.
    var credentials: [(name: String, path: String)] {
        values("LoadCredential").compactMap { value in
            guard let colon = value.firstIndex(of: ":") else { return nil }
            return (String(value[..<colon]), String(value[value.index(after: colon)...]))
        }
    }

    /// ExecStart's command line, split on spaces (a command, not a shell line).
    var start: [String] { values("ExecStart").flatMap { $0.split(separator: " ").map(String.init) } }

    /// KillSignal's number (SIGTERM when none is named).
    var killSignal: Int32? {
        let names: [String: Int32] = [
            "SIGTERM": SIGTERM, "SIGINT": SIGINT, "SIGHUP": SIGHUP, "SIGQUIT": SIGQUIT, "SIGKILL": SIGKILL,
        ]
        return names[values("KillSignal").last ?? "SIGTERM"]
    }

    /// The variables an EnvironmentFile sets: `NAME=value` lines; a line starting with `#` or `;` is a comment,
    /// and a value in matching quotes loses them.
    static func environment(_ text: String) -> [String: String] {
        var variables: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let line = line.trimmingPrefix(while: { $0 == " " || $0 == "\t" })
            guard let first = line.first, first != "#", first != ";", let equals = line.firstIndex(of: "=") else {
                continue
            }
            var value = line[line.index(after: equals)...]
            if value.count >= 2, let quote = value.first, quote == "\"" || quote == "'", value.last == quote {
                value = value.dropFirst().dropLast()
            }
            variables[String(line[..<equals])] = String(value)
        }
        return variables
    }
}
