import Foundation

/// What the doc test reads in the outputs of the documented commands and of the system: pure, so that each
/// reading is tested on real text.
enum DocTestReadings {
    /// The commands `duo-relay dev` prints to try it, as a person pastes them: the lines between
    /// "Try it from another shell:" and the `or: ` line (their two-space indent removed), then that line's command.
    static func devInstructions(_ output: String) -> (commands: String, push: String)? {
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(where: { $0.contains("Try it from another shell:") }),
            let end = lines[(start + 1)...].firstIndex(where: { $0.hasPrefix("or: ") })
        else { return nil }
        let commands = lines[(start + 1)..<end].map { $0.hasPrefix("  ") ? String($0.dropFirst(2)) : $0 }
            .joined(separator: "\n")
        let trimmed = String(commands.reversed().drop { $0 == "\n" }.reversed())
        let push = String(lines[end].dropFirst("or: ".count))
        guard !trimmed.isEmpty, !push.isEmpty else { return nil }
        return (trimmed, push)
    }

    /// Whether a /readyz body says that the limits are counted in Redis (`"limits":"shared"`).
    static func limitsShared(_ readyz: [UInt8]) -> Bool {
        let object = (try? JSONSerialization.jsonObject(with: Data(readyz))) as? [String: Any]
        return object?["limits"] as? String == "shared"
    }

    /// The milliseconds the Sentinel failover rehearsal printed (`the replica is the primary N ms after the stop
    /// began`).
    static func promotionMilliseconds(_ output: String) -> Int? {
        let prefix = "the replica is the primary "
        let suffix = " ms after the stop began"
        guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix(prefix) }), line.hasSuffix(suffix)
        else { return nil }
        return Int(line.dropFirst(prefix.count).dropLast(suffix.count))
    }

    /// Whether a line of `text` starts with `prefix`.
    static func hasLine(_ text: String, startingWith prefix: String) -> Bool {
        text.split(separator: "\n").contains { $0.hasPrefix(prefix) }
    }

    /// The outcomes `duo-relay push` printed, one a line.
    struct PushLines: Equatable {
        /// `push: delivered ...`
        var delivered = 0
        /// `push: refused for now (limit: phone); retry after ... (HTTP 429, ...`
        var phoneLimited = 0
        /// Every `push: ` line.
        var all = 0

        init(_ text: String) {
            let refused = "push: refused for now (limit: phone); retry after "
            for line in text.split(separator: "\n") where line.hasPrefix("push: ") {
                all += 1
                if line.hasPrefix("push: delivered") { delivered += 1 }
                if line.hasPrefix(refused), line.dropFirst(refused.count).contains(" (HTTP 429, ") { phoneLimited += 1 }
            }
        }
    }

    /// The processes `ss -p` names on each socket line (`users:(("tinyproxy",pid=12,fd=4))`): name and PID.
    static func socketUsers(_ ss: String) -> [[(name: String, pid: Int32)]] {
        ss.split(separator: "\n").map { line in
            line.components(separatedBy: "((").dropFirst().first.map { users in
                users.components(separatedBy: "),(").compactMap { user in
                    let fields = user.split(separator: ",")
                    guard let quoted = fields.first, let pid = fields.first(where: { $0.hasPrefix("pid=") }),
                        let number = Int32(pid.dropFirst(4))
                    else { return nil }
                    return (quoted.trimmingCharacters(in: CharacterSet(charactersIn: "\"")), number)
                }
            } ?? []
        }
    }

    /// A process's parent PID, name and state from its /proc/PID/stat line (`12 (duo-relay) S 7 ...`).
    static func processStat(_ line: String) -> (parent: Int32, name: String, state: Character)? {
        guard let open = line.firstIndex(of: "("), let close = line.lastIndex(of: ")") else { return nil }
        let name = String(line[line.index(after: open)..<close])
        let rest = line[line.index(after: close)...].split(separator: " ")
        guard rest.count >= 2, let state = rest[0].first, let parent = Int32(rest[1]) else { return nil }
        return (parent, name, state)
    }

    /// A block split before its first line that starts with `prefix` (the install block's `systemctl daemon-reload`):
    /// the lines above it, and the rest.
    static func split(_ block: String, before prefix: String) -> (head: String, tail: String) {
        let lines = block.split(separator: "\n", omittingEmptySubsequences: false)
        guard let index = lines.firstIndex(where: { $0.hasPrefix(prefix) }) else { return (block, "") }
        let head = lines[..<index].map { $0 + "\n" }.joined()
        return (head, block.dropFirst(head.count).description)
    }
}

/// The processes running here, from /proc.
enum ProcessTable {
    /// The PIDs of `parent`'s children named `name` (as `pgrep -P PARENT -x NAME`).
    static func children(of parent: Int32, named name: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.sorted().filter { pid in
            guard let stat = stat(pid) else { return false }
            return stat.parent == parent && stat.name == name && stat.state != "Z"
        }
    }

    /// Whether `pid` runs (not gone, not a zombie).
    static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = stat(pid) else { return false }
        return stat.state != "Z"
    }

    private static func stat(_ pid: Int32) -> (parent: Int32, name: String, state: Character)? {
        guard let line = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return nil }
        return DocTestReadings.processStat(line)
    }
}

extension DocTestReadings {
    /// The SHA-256 fingerprint a line names, as hex digits without colons in upper case: openssl's
    /// `sha256 Fingerprint=AB:CD:...` or the relay's `SHA-256 AB:CD:...` (the last one in `text`); nil if none.
    static func fingerprint(_ text: String) -> String? {
        for line in text.split(separator: "\n").reversed() {
            for marker in ["Fingerprint=", "SHA-256 "] {
                guard let range = line.range(of: marker, options: .caseInsensitive) else { continue }
                let hex = line[range.upperBound...].prefix { $0.isHexDigit || $0 == ":" }
                    .replacingOccurrences(of: ":", with: "").uppercased()
                if hex.count == 64 { return hex }
            }
        }
        return nil
    }
}
