/// A configuration or secret problem, reported in one line that names the key or variable at
/// fault and never contains a secret's value.
public struct ConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let unreadable = Code(rawValue: "unreadable")
        public static let notJSON = Code(rawValue: "not_json")
        public static let unknownKey = Code(rawValue: "unknown_key")
        public static let missing = Code(rawValue: "missing")
        public static let invalid = Code(rawValue: "invalid")
        public static let duplicateKey = Code(rawValue: "duplicate_key")
    }

    public let code: Code
    /// The configuration key (`apns.topic`) or variable (`RELAY_KEYS`) at fault.
    public let subject: String
    public let reason: String

    public init(_ code: Code, _ subject: String, _ reason: String) {
        self.code = code
        self.subject = subject
        self.reason = reason
    }

    /// One line, whatever the subject or reason holds: a subject can be a key taken from the file
    /// (an unknown key), so control characters, line separators and invisible format characters
    /// are written as `\u{…}` (a newline or terminal escape in a key must not forge log lines).
    public var description: String { Self.printable(subject) + ": " + Self.printable(reason) }

    static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .lineSeparator, .paragraphSeparator, .format:
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// The error for a text that ``JSONParser`` refused, about `subject` (`config`, `RELAY_KEYS`): the position
    /// and problem of a syntax error; for a member named twice, its dotted path as the subject, each name shown
    /// only when `shows` allows it (a name may be a secret pasted in the wrong place) and `…` otherwise.
    init(_ failure: JSONParser.Failure, subject: String, shows: (String) -> Bool) {
        switch failure {
        case .syntax(let line, let column, let problem):
            self.init(.notJSON, subject, "is not JSON: line \(line), column \(column): \(problem)")
        case .duplicateMember(let path):
            let names = path.map { shows($0) ? $0 : "…" }
            self.init(
                .duplicateKey, subject == "config" ? names.joined(separator: ".") : subject,
                (subject == "config" ? "" : "member " + names.joined(separator: ".") + " ")
                    + "is given more than once: give it once (a reader would otherwise pick one silently)")
        }
    }

    public static func == (lhs: ConfigurationError, rhs: ConfigurationError) -> Bool {
        lhs.code == rhs.code && lhs.subject == rhs.subject
    }
}
