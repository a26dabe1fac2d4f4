import ErrorCodes
import JSON

/// A configuration or secret problem, reported in one line that names the key or variable at
/// fault and never contains a secret's value.
///
/// The project's error shape (``ErrorCodes/CodedError``), with one difference: two errors are equal when their
/// codes and subjects are (which key is at fault is what a caller and a test decide by).
public struct ConfigurationError: CodedError, Sendable {
    /// What went wrong, to decide by (the static members of `ErrorCode` below).
    public typealias Code = ErrorCode<ConfigurationError>

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

extension ErrorCode where Domain == ConfigurationError {
    /// A file or variable could not be read.
    public static var unreadable: Self { Self("unreadable") }
    /// The text is not JSON.
    public static var notJSON: Self { Self("not_json") }
    /// A key the relay does not know.
    public static var unknownKey: Self { Self("unknown_key") }
    /// A required key or variable is absent.
    public static var missing: Self { Self("missing") }
    /// A value the relay cannot use.
    public static var invalid: Self { Self("invalid") }
    /// A member given more than once.
    public static var duplicateKey: Self { Self("duplicate_key") }
}
