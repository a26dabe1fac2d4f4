import JSON

/// What a GOAWAY's debug data says: APNs sends a JSON object such as `{"reason":"Shutdown"}`. Only a `reason` that
/// is a plain word (1 to 64 ASCII letters and digits) is taken, from data that is one JSON object of at most 1 KiB
/// as the project's strict reader reads it (a member named twice included: which one would count is not said);
/// anything else is not repeated (it could carry anything).
enum GoawayDebugData {
    /// The plain-word `reason` of `data`, or nil.
    static func reason(_ data: some Collection<UInt8>) -> String? {
        guard !data.isEmpty, data.count <= 1024, case .object(let members) = JSONValue.parse(Array(data)),
            case .string(let reason) = members["reason"], isPlainWord(reason)
        else { return nil }
        return reason
    }

    private static func isPlainWord(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) }
    }
}
