import Foundation

/// A systemd unit file read the way systemd reads it: `[Section]` headers, `Key=Value` lines,
/// `#` and `;` comment lines, and a key repeated in a section keeping every value in order.
struct SystemdUnit {
    private var entries: [(section: String, key: String, value: String)] = []

    init(_ text: String) {
        var section = ""
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast())
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            entries.append((section, key, value))
        }
    }

    /// Every value given to `key` in `section`, in order.
    func values(_ key: String, in section: String = "Service") -> [String] {
        entries.filter { $0.section == section && $0.key == key }.map(\.value)
    }

    /// The value that counts for a single-valued key: the last one given.
    func value(_ key: String, in section: String = "Service") -> String? {
        values(key, in: section).last
    }

    /// Whether `key` appears in `section` at all (an empty value included).
    func has(_ key: String, in section: String = "Service") -> Bool {
        !values(key, in: section).isEmpty
    }
}
