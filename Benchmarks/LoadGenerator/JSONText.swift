import Foundation

/// The few pieces of JSON text the subcommands print, and reading one object back.
enum JSONText {
    /// A JSON string (the names printed here are plain ASCII; quotes and backslashes are escaped).
    static func string(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// A finite number with `digits` decimals, or null.
    static func number(_ value: Double?, digits: Int) -> String {
        guard let value, value.isFinite else { return "null" }
        return String(format: "%.\(digits)f", value)
    }

    /// One JSON object from its text; nil if it is not one.
    static func object(_ text: Substring) -> [String: Any]? {
        guard let data = text.data(using: .utf8) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}
