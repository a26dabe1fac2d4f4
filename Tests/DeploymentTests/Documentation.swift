import Foundation

/// What the reference (docs/operations/configuration.md) documents about the relay as implemented: the configuration
/// keys it accepts (section "Configuration") and the secret variables it reads (section "Secrets").
enum Documentation {
    /// The operator's reference of commands, configuration and secrets.
    static let reference = "docs/operations/configuration.md"

    /// Keys the relay accepts that the reference's example does not show: `metrics_listen` (where
    /// `GET /metrics` is served; off unless set), read by `RelayConfiguration.parse`.
    static let keysBeyondExample: [String: Set<String>] = ["metrics_listen": []]

    /// The configuration file's keys: each top-level key with the keys allowed inside it (none for a scalar).
    static func configurationKeys() throws -> [String: Set<String>] {
        let configuration = section("Configuration", of: try Repository.text(reference))
        var keys: [String: Set<String>] = keysBeyondExample
        // Every ```json example of the section (the whole file, then optional blocks such as `limits_store`).
        var searchFrom = configuration.startIndex
        while let start = configuration.range(of: "```json\n", range: searchFrom..<configuration.endIndex),
            let end = configuration.range(of: "\n```", range: start.upperBound..<configuration.endIndex)
        {
            let example = try JSONNode(parsing: String(configuration[start.upperBound..<end.lowerBound]))
            for key in example.keys { keys[key] = example[key].keys }
            searchFrom = end.upperBound
        }
        guard keys.count > keysBeyondExample.count else {
            throw DocumentationError(reason: "the reference's Configuration section has no ```json example")
        }
        return keys
    }

    /// The secret variables in the reference's Secrets table (its first column's backticked names).
    static func secretNames() throws -> Set<String> {
        var names: Set<String> = []
        for line in section("Secrets", of: try Repository.text(reference)).split(separator: "\n")
        where line.hasPrefix("| `") {
            let firstColumn = line.dropFirst(2).prefix { $0 != "|" }
            let pieces = firstColumn.split(separator: "`", omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() where index % 2 == 1 { names.insert(String(piece)) }
        }
        return names
    }

    /// The operations documents: the index OPERATIONS.md and every page of docs/operations/, each with its path.
    static func operationsDocuments() throws -> [(path: String, text: String)] {
        let pages = Repository.allFiles(under: "docs/operations").filter { $0.hasSuffix(".md") }.sorted()
        return try (["OPERATIONS.md"] + pages).map { ($0, try Repository.text($0)) }
    }

    /// The text between the heading `## title` and the next `## ` heading.
    static func section(_ title: String, of text: String) -> String {
        guard let heading = text.range(of: "\n## " + title + "\n") else { return "" }
        let rest = text[heading.upperBound...]
        let end = rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex
        return String(rest[..<end])
    }
}

struct DocumentationError: Error, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}
