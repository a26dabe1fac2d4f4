/// How a container's process is confined, read from `/proc/PID/status` and `/proc/PID/limits`: what the
/// documented run and the Kubernetes securityContext promise.
struct ContainerConfinement: Equatable {
    var uid: String?
    var gid: String?
    var effectiveCapabilities: String?
    var boundingCapabilities: String?
    var noNewPrivileges: String?
    var seccomp: String?

    /// Reads the fields of a `/proc/PID/status` text (`Name:\tvalue...`); the first value of Uid and Gid (the real ID).
    init(status: String) {
        var fields: [Substring: [Substring]] = [:]
        for line in status.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon]] = line[line.index(after: colon)...].split(whereSeparator: { $0 == " " || $0 == "\t" }
            )
        }
        func first(_ name: Substring) -> String? { fields[name]?.first.map(String.init) }
        func only(_ name: Substring) -> String? { fields[name].flatMap { $0.count == 1 ? String($0[0]) : nil } }
        uid = first("Uid")
        gid = first("Gid")
        effectiveCapabilities = only("CapEff")
        boundingCapabilities = only("CapBnd")
        noNewPrivileges = only("NoNewPrivs")
        seccomp = only("Seccomp")
    }

    /// What is wrong, as the FAIL line's words after the check's name; empty when the process is confined.
    var problems: [String] {
        var problems: [String] = []
        if uid != "10001" || gid != "10001" { problems.append("not UID/GID 10001") }
        if !Self.noCapabilities(effectiveCapabilities) || !Self.noCapabilities(boundingCapabilities) {
            problems.append("holds capabilities")
        }
        if noNewPrivileges != "1" { problems.append("may gain privileges (no_new_privs unset)") }
        // 2: a filter (1 is strict mode, 0 none).
        if seccomp != "2" { problems.append("no seccomp filter") }
        return problems
    }

    private static func noCapabilities(_ mask: String?) -> Bool {
        guard let mask, !mask.isEmpty else { return false }
        return mask.allSatisfy { $0 == "0" }
    }

    /// Whether `/proc/PID/limits` says core files are off: soft and hard `Max core file size` 0.
    static func coreFilesOff(limits: String) -> Bool {
        limits.split(separator: "\n").contains { line in
            guard line.hasPrefix("Max core file size") else { return false }
            let values = line.dropFirst("Max core file size".count).split(separator: " ")
            return values.count >= 2 && values[0] == "0" && values[1] == "0"
        }
    }
}
