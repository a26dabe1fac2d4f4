import JSON

/// One line of what the relay prints (docs/DESIGN.md, "Configuration": `log`): a time, a level, an event and
/// fields, written as text for people or as one JSON object for log pipelines.
///
/// Text: `2026-12-05T14:35:00.123Z info duo-relay: listening on 127.0.0.1:8787`.
/// JSON: `{"time":"2026-12-05T14:35:00.123Z","level":"info","event":"listening",
/// "message":"listening on 127.0.0.1:8787","fields":{"address":"127.0.0.1:8787"}}`.
///
/// The message is the same sentence in both formats, so a person reading either learns the same; the
/// event names the kind of line (stable, for filters and alerts) and the fields repeat the message's
/// values for a pipeline. Pure: the time comes in with the line.
public struct LogLine: Sendable, Equatable {
    /// How serious a line is; journald gets it as the line's priority.
    public enum Level: String, Sendable, CaseIterable {
        /// The relay or a command cannot do what it was asked (a start refused, a reload refused).
        case error
        /// Something an operator should look at, the relay carrying on (an APNs problem, a store unavailable).
        case warning
        /// Normal operation worth a line (listening, reloaded, a problem resolved, stopped).
        case info

        /// The syslog priority (RFC 5424) journald reads from a `<N>` prefix.
        public var syslogPriority: Int {
            switch self {
            case .error: 3
            case .warning: 4
            case .info: 6
            }
        }
    }

    /// `log.format` in the configuration.
    public enum Format: String, Sendable, CaseIterable {
        case text, json
    }

    /// The one prefix of every text line's message.
    public static let program = "duo-relay"
    /// The event of a line whose call site names none.
    public static let defaultEvent = "message"

    /// Milliseconds since the Unix epoch (UTC).
    public var time: UInt64
    public var level: Level
    /// A short stable name of the kind of line: lowercase letters, digits and `_`.
    public var event: String
    /// The sentence a person reads, without the program's prefix.
    public var message: String
    /// Values the message names, for a pipeline (never an identifier: the message's rules hold).
    public var fields: [Field]

    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// A line; `message` loses a leading `duo-relay: ` (or `duo-relay `) so that the prefix appears once, and
    /// its line breaks become spaces (one event is one line). An `event` that is not an event name
    /// (``isEventName(_:)``) is the default event: a line a pipeline could not read back is never written.
    public init(time: UInt64, level: Level, event: String = LogLine.defaultEvent, message: String, fields: [Field] = [])
    {
        self.time = time
        self.level = level
        self.event = Self.isEventName(event) ? event : Self.defaultEvent
        self.message = Self.withoutPrefix(Self.flattened(message))
        self.fields = fields.map { Field($0.name, Self.flattened($0.value)) }
    }

    /// The line in `format`, without its line end.
    public func rendered(_ format: Format) -> String {
        switch format {
        case .text:
            return Timestamp.iso8601(milliseconds: time) + " " + level.rawValue + " " + Self.program + ": " + message
        case .json:
            var text = #"{"time":""# + Timestamp.iso8601(milliseconds: time) + #"","level":""# + level.rawValue
            text += #"","event":"# + Self.quoted(event) + #","message":"# + Self.quoted(message) + #","fields":{"#
            text += fields.map { Self.quoted($0.name) + ":" + Self.quoted($0.value) }.joined(separator: ",")
            return text + "}}"
        }
    }

    /// Reads a line printed in either format (what a test or a pipeline does); nil if it is not a log line:
    /// no valid time, an unknown level, not exactly one `duo-relay` prefix, a JSON object with other members.
    public static func parse(_ line: some StringProtocol) -> LogLine? {
        if line.hasPrefix("{") { return parseJSON(String(line)) }
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let time = Timestamp.milliseconds(iso8601: parts[0]),
            let level = Level(rawValue: String(parts[1])), parts[2].hasPrefix(program + ": ")
        else { return nil }
        let message = String(parts[2].dropFirst(program.count + 2))
        guard !message.hasPrefix(program) else { return nil }
        return LogLine(time: time, level: level, message: message)
    }

    private static func parseJSON(_ line: String) -> LogLine? {
        guard case .object(let members) = JSONValue.parse(Array(line.utf8)),
            Set(members.keys) == ["time", "level", "event", "message", "fields"],
            case .string(let timeText) = members["time"], let time = Timestamp.milliseconds(iso8601: timeText),
            case .string(let levelText) = members["level"], let level = Level(rawValue: levelText),
            case .string(let event) = members["event"], isEventName(event),
            case .string(let message) = members["message"], !message.hasPrefix(program),
            case .object(let fieldMembers) = members["fields"]
        else { return nil }
        var fields: [Field] = []
        for (name, value) in fieldMembers.sorted(by: { $0.key < $1.key }) {
            guard case .string(let text) = value else { return nil }
            fields.append(Field(name, text))
        }
        return LogLine(time: time, level: level, event: event, message: message, fields: fields)
    }

    /// Whether `name` is a valid event name: 1 to 64 of `a-z`, `0-9`, `_`.
    public static func isEventName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64
            && name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5f }
    }

    private static func flattened(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0x0a || $0 == 0x0d }) else { return text }
        return String(decoding: text.utf8.map { $0 == 0x0a || $0 == 0x0d ? 0x20 : $0 }, as: UTF8.self)
    }

    private static func withoutPrefix(_ text: String) -> String {
        var rest = Substring(text)
        // "duo-relay: x", "duo-relay dev: x" → "x", "dev: x": the prefix is the line's, once.
        while rest.hasPrefix(program + ":") || rest.hasPrefix(program + " ") {
            rest = rest.dropFirst(program.count)
            if rest.hasPrefix(":") { rest = rest.dropFirst() }
            while rest.hasPrefix(" ") { rest = rest.dropFirst() }
        }
        return String(rest)
    }

    /// `text` as a JSON string: quotes, backslashes and control characters escaped.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7f {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
