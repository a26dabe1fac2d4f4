import ErrorCodes

/// The project's one JSON (RFC 8259) reader, strict: for the configuration file, `RELAY_KEYS` and the debug data of
/// APNs' GOAWAY. What is not JSON is refused with its line and column (Foundation's reader accepts a trailing comma),
/// and an object that names a member twice is refused with that member's path (any reader would otherwise pick one
/// of the values silently).
///
/// Errors describe the problem in words and by position, never by quoting the text: the text may be a secret.
public struct JSONParser {
    /// Why a text was refused. Its reason names positions and problems, never a member's name (which may be a
    /// secret); the caller decides which names a message may show.
    public enum Failure: CodedError {
        /// Not JSON: `line` and `column` count from 1 (the column in bytes).
        case syntax(line: Int, column: Int, problem: String)
        /// An object names one member twice: the member names from the outermost object down to it.
        case duplicateMember(path: [String])

        public var code: ErrorCode<Failure> {
            switch self {
            case .syntax: ErrorCode("syntax")
            case .duplicateMember: ErrorCode("duplicate_member")
            }
        }

        public var reason: String {
            switch self {
            case .syntax(let line, let column, let problem): "line \(line), column \(column): \(problem)"
            case .duplicateMember(let path): "a member is given more than once, \(path.count) levels deep"
            }
        }
    }

    /// Nesting deeper than any configuration needs is refused before it can exhaust the stack.
    public static let maximumDepth = 64

    private let bytes: [UInt8]
    private var offset = 0
    private var path: [String] = []

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Parses one JSON text (a value with optional whitespace around it).
    public static func parse(_ bytes: [UInt8]) throws(Failure) -> JSONValue {
        var parser = JSONParser(bytes)
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw parser.failure("the text is not UTF-8")
        }
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.offset == bytes.count else { throw parser.failure("unexpected text after the JSON value") }
        return value
    }

    // MARK: Values

    private mutating func value(depth: Int) throws(Failure) -> JSONValue {
        guard depth < Self.maximumDepth else { throw failure("nested too deeply") }
        guard let byte = peek else { throw failure("unexpected end of the text: a value is missing") }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure("unexpected character: a value was expected")
        }
    }

    private mutating func object(depth: Int) throws(Failure) -> JSONValue {
        offset += 1
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if take(UInt8(ascii: "}")) { return .object(members) }
        while true {
            skipWhitespace()
            guard peek == UInt8(ascii: "\"") else {
                throw failure(
                    members.isEmpty
                        ? "expected a member name in double quotes"
                        : "expected a member name after ',' (a trailing comma is not JSON)"
                )
            }
            let name = try string()
            guard members[name] == nil else { throw Failure.duplicateMember(path: path + [name]) }
            skipWhitespace()
            guard take(UInt8(ascii: ":")) else { throw failure("expected ':' after a member name") }
            skipWhitespace()
            path.append(name)
            members[name] = try value(depth: depth + 1)
            path.removeLast()
            skipWhitespace()
            if take(UInt8(ascii: "}")) { return .object(members) }
            guard take(UInt8(ascii: ",")) else { throw failure("expected ',' or '}' after a member") }
        }
    }

    private mutating func array(depth: Int) throws(Failure) -> JSONValue {
        offset += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if take(UInt8(ascii: "]")) { return .array(elements) }
        while true {
            skipWhitespace()
            if peek == UInt8(ascii: "]") { throw failure("expected a value after ',' (a trailing comma is not JSON)") }
            elements.append(try value(depth: depth + 1))
            skipWhitespace()
            if take(UInt8(ascii: "]")) { return .array(elements) }
            guard take(UInt8(ascii: ",")) else { throw failure("expected ',' or ']' after an element") }
        }
    }

    private mutating func literal(_ word: String, _ value: JSONValue) throws(Failure) -> JSONValue {
        for byte in word.utf8 {
            guard take(byte) else { throw failure("unexpected character: a value was expected") }
        }
        return value
    }

    /// An integer when it has neither fraction nor exponent and fits 64 bits; otherwise a floating-point number.
    private mutating func number() throws(Failure) -> JSONValue {
        let start = offset
        _ = take(UInt8(ascii: "-"))
        if take(UInt8(ascii: "0")) {
            if let next = peek, isDigit(next) { throw failure("a number must not start with a leading zero") }
        } else {
            guard skipDigits() else { throw failure("invalid number: a digit was expected") }
        }
        var integral = true
        if take(UInt8(ascii: ".")) {
            integral = false
            guard skipDigits() else { throw failure("invalid number: a digit was expected after '.'") }
        }
        if take(UInt8(ascii: "e")) || take(UInt8(ascii: "E")) {
            integral = false
            if !take(UInt8(ascii: "+")) { _ = take(UInt8(ascii: "-")) }
            guard skipDigits() else { throw failure("invalid number: a digit was expected in the exponent") }
        }
        let text = String(decoding: bytes[start..<offset], as: UTF8.self)
        if integral, let integer = Int64(text) { return .integer(integer) }
        guard let double = Double(text), double.isFinite else { throw failure("number out of range") }
        return .number(double)
    }

    private mutating func string() throws(Failure) -> String {
        offset += 1
        var out: [UInt8] = []
        while true {
            guard let byte = peek else { throw failure("unterminated string") }
            offset += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                try unescape(into: &out)
            case 0..<0x20:
                offset -= 1
                throw failure("a control character in a string must be escaped")
            default:
                out.append(byte)
            }
        }
    }

    private mutating func unescape(into out: inout [UInt8]) throws(Failure) {
        guard let byte = peek else { throw failure("unterminated string") }
        offset += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(byte)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0c)
        case UInt8(ascii: "n"): out.append(0x0a)
        case UInt8(ascii: "r"): out.append(0x0d)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hexQuad()
            if (0xD800..<0xDC00).contains(scalar) {
                guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")) else {
                    throw failure("a \\u escape of a high surrogate must be followed by a low one")
                }
                let low = try hexQuad()
                guard (0xDC00..<0xE000).contains(low) else {
                    throw failure("a \\u escape of a high surrogate must be followed by a low one")
                }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let character = Unicode.Scalar(scalar) else { throw failure("a \\u escape of a lone surrogate") }
            out.append(contentsOf: Array(String(Character(character)).utf8))
        default:
            offset -= 1
            throw failure("invalid escape in a string")
        }
    }

    private mutating func hexQuad() throws(Failure) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = peek, let digit = Self.hexValue(byte) else {
                throw failure("a \\u escape needs four hex digits")
            }
            offset += 1
            value = value << 4 | digit
        }
        return value
    }

    // MARK: Bytes

    private var peek: UInt8? { offset < bytes.count ? bytes[offset] : nil }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard peek == byte else { return false }
        offset += 1
        return true
    }

    private mutating func skipDigits() -> Bool {
        let start = offset
        while let byte = peek, isDigit(byte) { offset += 1 }
        return offset > start
    }

    private mutating func skipWhitespace() {
        while let byte = peek, byte == 0x20 || byte == 0x09 || byte == 0x0a || byte == 0x0d { offset += 1 }
    }

    private func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private static func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    /// The failure at the current position.
    private func failure(_ problem: String) -> Failure {
        var line = 1
        var lineStart = 0
        for index in 0..<min(offset, bytes.count) where bytes[index] == 0x0a {
            line += 1
            lineStart = index + 1
        }
        return .syntax(line: line, column: offset - lineStart + 1, problem: problem)
    }
}
