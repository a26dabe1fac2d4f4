/// What a GOAWAY's debug data says, read without Foundation: APNs sends a JSON object such as
/// `{"reason":"Shutdown"}`. Only a `reason` that is a plain word (1 to 64 ASCII letters and digits) is taken, from
/// data that is one well-formed JSON object of at most 1 KiB; anything else is not repeated (it could carry
/// anything).
struct GoawayDebugData {
    private let bytes: [UInt8]
    private var index = 0

    /// The plain-word `reason` of `data`, or nil.
    static func reason(_ data: some Collection<UInt8>) -> String? {
        guard !data.isEmpty, data.count <= 1024 else { return nil }
        var reader = GoawayDebugData(bytes: Array(data))
        return reader.readReason()
    }

    private init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The whole data as one object; the last `reason` member wins, as a JSON object's reader keeps it.
    private mutating func readReason() -> String? {
        skipSpace()
        guard take(UInt8(ascii: "{")) else { return nil }
        var reason: String??
        skipSpace()
        if !take(UInt8(ascii: "}")) {
            repeat {
                skipSpace()
                guard let key = readString() else { return nil }
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                if key == "reason", peek == UInt8(ascii: "\"") {
                    guard let value = readString() else { return nil }
                    reason = .some(Self.isPlainWord(value) ? value : nil)
                } else {
                    guard skipValue(depth: 0) else { return nil }
                    if key == "reason" { reason = .some(nil) }
                }
                skipSpace()
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")) else { return nil }
        }
        skipSpace()
        guard index == bytes.count else { return nil }
        return reason ?? nil
    }

    private static func isPlainWord(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) }
    }

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard peek == byte else { return false }
        index += 1
        return true
    }

    private mutating func skipSpace() {
        while let byte = peek, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    /// A string, its escapes decoded; nil when malformed (a control byte, a bad escape, no closing quote, or
    /// not UTF-8).
    private mutating func readString() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        var text: [UInt8] = []
        while let byte = peek {
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(validating: text, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let escaped = peek else { return nil }
                index += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(escaped)
                case UInt8(ascii: "b"): text.append(0x08)
                case UInt8(ascii: "f"): text.append(0x0C)
                case UInt8(ascii: "n"): text.append(0x0A)
                case UInt8(ascii: "r"): text.append(0x0D)
                case UInt8(ascii: "t"): text.append(0x09)
                case UInt8(ascii: "u"):
                    guard let scalar = readEscapedScalar() else { return nil }
                    text.append(contentsOf: String(Character(scalar)).utf8)
                default: return nil
                }
            case 0..<0x20:
                return nil
            default:
                text.append(byte)
            }
        }
        return nil
    }

    /// The code point of `\uXXXX` (a surrogate pair counting as one), after its `\u`.
    private mutating func readEscapedScalar() -> Unicode.Scalar? {
        guard let high = readHex4() else { return nil }
        if (0xD800..<0xDC00).contains(high) {
            guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let low = readHex4(),
                (0xDC00..<0xE000).contains(low)
            else { return nil }
            return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        }
        return Unicode.Scalar(high)
    }

    private mutating func readHex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            index += 1
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// Skips one well-formed value of any kind (nesting bounded: the data is at most 1 KiB anyway).
    private mutating func skipValue(depth: Int) -> Bool {
        guard depth < 64, let byte = peek else { return false }
        switch byte {
        case UInt8(ascii: "\""):
            return readString() != nil
        case UInt8(ascii: "{"):
            index += 1
            skipSpace()
            if take(UInt8(ascii: "}")) { return true }
            repeat {
                skipSpace()
                guard readString() != nil else { return false }
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return false }
                skipSpace()
                guard skipValue(depth: depth + 1) else { return false }
                skipSpace()
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "}"))
        case UInt8(ascii: "["):
            index += 1
            skipSpace()
            if take(UInt8(ascii: "]")) { return true }
            repeat {
                skipSpace()
                guard skipValue(depth: depth + 1) else { return false }
                skipSpace()
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "]"))
        case UInt8(ascii: "t"): return skipWord("true")
        case UInt8(ascii: "f"): return skipWord("false")
        case UInt8(ascii: "n"): return skipWord("null")
        default: return skipNumber()
        }
    }

    private mutating func skipWord(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        index += count
        return true
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func skipNumber() -> Bool {
        _ = take(UInt8(ascii: "-"))
        guard let first = peek, isDigit(first) else { return false }
        index += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        if take(UInt8(ascii: ".")) {
            guard let next = peek, isDigit(next) else { return false }
            skipDigits()
        }
        if take(UInt8(ascii: "e")) || take(UInt8(ascii: "E")) {
            if !take(UInt8(ascii: "+")) { _ = take(UInt8(ascii: "-")) }
            guard let next = peek, isDigit(next) else { return false }
            skipDigits()
        }
        return true
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    private mutating func skipDigits() {
        while let byte = peek, isDigit(byte) { index += 1 }
    }
}
