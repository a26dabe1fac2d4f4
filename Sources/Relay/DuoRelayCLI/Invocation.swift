import Foundation

/// How the commands this binary prints as hints name it: `duo-relay` when that name on `PATH` is this very
/// binary (installed with scripts/install), otherwise the binary's own path (scripts/dev runs
/// `.build/release/duo-relay`, which no `PATH` holds), so that a printed command works as printed.
enum Invocation {
    static let command: String = {
        guard let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else {
            return "duo-relay"
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("duo-relay")
            if FileManager.default.isExecutableFile(atPath: candidate.path) {
                // The first one on PATH is what `duo-relay` runs.
                return candidate.resolvingSymlinksInPath().path == executable ? "duo-relay" : quoted(executable)
            }
        }
        return quoted(executable)
    }()

    /// `path`, quoted for a POSIX shell when it holds anything but the characters of a plain path.
    static func quoted(_ path: String) -> String {
        let plain = path.unicodeScalars.allSatisfy {
            $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "/._-+".unicodeScalars.contains($0))
        }
        return plain ? path : "'" + path.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
    }
}
