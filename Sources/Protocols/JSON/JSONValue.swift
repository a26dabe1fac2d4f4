/// A JSON document as plain values, so a reader can check it member by member (unknown members refused, types
/// exact: `true` is not a number and `1.5` is not an integer).
public enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Parses a JSON text strictly (``JSONParser``); nil if it is not JSON or names an object's member twice.
    public static func parse(_ bytes: [UInt8]) -> JSONValue? {
        try? JSONParser.parse(bytes)
    }
}
