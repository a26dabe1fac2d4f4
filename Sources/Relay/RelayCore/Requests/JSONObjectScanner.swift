/// Reads the string members of a request body that must be one JSON object (RFC 8259), without
/// building a document: the relay's two request shapes are flat objects of strings.
///
/// It decides as `JSONDecoder` decoding a `Decodable` struct of `String` properties did: member names
/// and values are compared after unescaping; any member of the object given twice, wanted or not,
/// makes the body unacceptable (readers that keep the first and readers that keep the last would
/// disagree on it; docs/DESIGN.md, "Duplicates"); members not asked for may hold any JSON value; a wanted member that is not a string (`null` included) makes
/// the body unacceptable, as a type mismatch makes `JSONDecoder` throw. It is stricter in one way,
/// the one docs/DESIGN.md asks for (malformed JSON: 400): the whole body must be valid JSON in UTF-8
/// (RFC 8259: one object, optional surrounding whitespace, a leading UTF-8 byte order mark ignored,
/// nesting at most 512 deep), where `JSONDecoder` lets malformed members it never reads pass
/// (trailing commas, `01`, `1.`, unknown escapes, lone surrogates, control characters, bad UTF-8).
struct JSONObjectScanner {
    /// What became of one wanted member.
    enum Member: Equatable {
        case absent
        case string(String)
        /// Present, but not a string.
        case mismatched

        /// The string's value; empty for the other cases (read only after checking them).
        var text: String {
            if case .string(let value) = self { return value }
            return ""
        }
    }

    /// What a scan found.
    enum Scan: Equatable {
        /// The wanted members, in the order asked for.
        case members([Member])
        /// The body is not one valid JSON object in UTF-8.
        case malformed
        /// The wanted member at this position is given more than once.
        case duplicate(Int)
        /// A member not asked for is given more than once (its name is the caller's to keep quiet about).
        case duplicateUnknown
    }

    static let maximumDepth = 512

    /// The wanted members of `body`, in the order of `names`.
    static func scan(_ names: [String], in body: [UInt8]) -> Scan {
        guard isValidUTF8(body) else { return .malformed }
        return body.withUnsafeBufferPointer { buffer -> Scan in
            var scanner = JSONObjectScanner(bytes: buffer)
            if let found = scanner.topLevelObject(names) { return .members(found) }
            if scanner.duplicateUnknown { return .duplicateUnknown }
            return scanner.duplicate.map { .duplicate($0) } ?? .malformed
        }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    /// Set when a wanted member was found twice (the scan then stops).
    private var duplicate: Int?
    /// Set when a member not asked for was found twice (the scan then stops).
    private var duplicateUnknown = false

    private init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    // MARK: Grammar

    private mutating func topLevelObject(_ wanted: [String]) -> [Member]? {
        if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF { index = 3 }
        skipWhitespace()
        guard take(UInt8(ascii: "{")) else { return nil }
        var found = [Member](repeating: .absent, count: wanted.count)
        // The names of members not asked for, as unescaped bytes; a body rarely has any, so nothing is
        // allocated for the relay's own requests.
        var others: Set<[UInt8]> = []
        skipWhitespace()
        if !take(UInt8(ascii: "}")) {
            while true {
                skipWhitespace()
                guard let name = string() else { return nil }
                skipWhitespace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipWhitespace()
                // Member names are compared as unescaped text, like Unicode scalars (String's `==`
                // would also match canonically equivalent spellings, which JSONDecoder does not).
                if let slot = Self.slot(of: name, in: wanted) {
                    guard found[slot] == .absent else {
                        duplicate = slot
                        return nil
                    }
                    if peek == UInt8(ascii: "\"") {
                        guard let value = string() else { return nil }
                        found[slot] = .string(value)
                    } else {
                        guard skipValue(depth: 1) else { return nil }
                        found[slot] = .mismatched
                    }
                } else {
                    guard others.insert(Array(name.utf8)).inserted else {
                        duplicateUnknown = true
                        return nil
                    }
                    guard skipValue(depth: 1) else { return nil }
                }
                skipWhitespace()
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                break
            }
        }
        skipWhitespace()
        return index == bytes.count ? found : nil
    }

    /// The position of `name` among `wanted`, comparing UTF-8 bytes (native strings: their own storage).
    /// Reads both in place: a copy of each (`var` for `withUTF8`) cost a retain and a release per name tried.
    private static func slot(of name: String, in wanted: [String]) -> Int? {
        name.utf8.withContiguousStorageIfAvailable { name in
            wanted.indices.first { index in
                wanted[index].utf8.withContiguousStorageIfAvailable { candidate in
                    candidate.count == name.count && candidate.elementsEqual(name)
                } ?? wanted[index].utf8.elementsEqual(name)
            }
        } ?? wanted.firstIndex { $0.utf8.elementsEqual(name.utf8) }
    }

    /// Skips one value of any kind; false if it is malformed or nested too deeply.
    private mutating func skipValue(depth: Int) -> Bool {
        guard let byte = peek else { return false }
        switch byte {
        case UInt8(ascii: "\""):
            return skipString()
        case UInt8(ascii: "{"):
            guard depth < Self.maximumDepth else { return false }
            index += 1
            skipWhitespace()
            if take(UInt8(ascii: "}")) { return true }
            while true {
                skipWhitespace()
                guard skipString() else { return false }
                skipWhitespace()
                guard take(UInt8(ascii: ":")) else { return false }
                skipWhitespace()
                guard skipValue(depth: depth + 1) else { return false }
                skipWhitespace()
                if take(UInt8(ascii: ",")) { continue }
                return take(UInt8(ascii: "}"))
            }
        case UInt8(ascii: "["):
            guard depth < Self.maximumDepth else { return false }
            index += 1
            skipWhitespace()
            if take(UInt8(ascii: "]")) { return true }
            while true {
                skipWhitespace()
                guard skipValue(depth: depth + 1) else { return false }
                skipWhitespace()
                if take(UInt8(ascii: ",")) { continue }
                return take(UInt8(ascii: "]"))
            }
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        default: return number()
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    /// A number must also fit a Double (as JSONSerialization and most readers require): `1e999` is
    /// refused, so that no reader sees a different document than the relay did.
    private mutating func number() -> Bool {
        let start = index
        _ = take(UInt8(ascii: "-"))
        if take(UInt8(ascii: "0")) {
            // A leading zero stands alone.
        } else {
            guard let first = peek, first >= UInt8(ascii: "1") && first <= UInt8(ascii: "9") else { return false }
            skipDigits()
        }
        if take(UInt8(ascii: ".")) {
            guard skipDigits() else { return false }
        }
        if take(UInt8(ascii: "e")) || take(UInt8(ascii: "E")) {
            if !take(UInt8(ascii: "+")) { _ = take(UInt8(ascii: "-")) }
            guard skipDigits() else { return false }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        return Double(text)?.isFinite == true
    }

    /// Skips one or more digits; false if there is none.
    @discardableResult
    private mutating func skipDigits() -> Bool {
        let start = index
        while index < bytes.count && bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9") {
            index += 1
        }
        return index > start
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        index += count
        return true
    }

    // MARK: Strings

    /// Skips a string, checking its escapes and characters.
    private mutating func skipString() -> Bool {
        guard take(UInt8(ascii: "\"")) else { return false }
        skipPlainCharacters()
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""): return true
            case UInt8(ascii: "\\"):
                var nothing: [UInt8] = []
                guard unescape(appendingTo: &nothing, keep: false) else { return false }
            case 0..<0x20: return false
            default: continue
            }
        }
        return false
    }

    /// Reads a string, unescaped.
    private mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        // The common case: no escape, so the text is the bytes as they are (already valid UTF-8).
        skipPlainCharacters()
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { return nil }
            index += 1
        }
        guard index < bytes.count else { return nil }
        var decoded = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""): return String(decoding: decoded, as: UTF8.self)
            case UInt8(ascii: "\\"): guard unescape(appendingTo: &decoded, keep: true) else { return nil }
            case 0..<0x20: return nil
            default: decoded.append(byte)
            }
        }
        return nil
    }

    /// Reads the escape after a backslash, appending its UTF-8 to `out` if `keep`.
    private mutating func unescape(appendingTo out: inout [UInt8], keep: Bool) -> Bool {
        guard let byte = peek else { return false }
        index += 1
        let simple: UInt8?
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): simple = byte
        case UInt8(ascii: "b"): simple = 0x08
        case UInt8(ascii: "f"): simple = 0x0C
        case UInt8(ascii: "n"): simple = 0x0A
        case UInt8(ascii: "r"): simple = 0x0D
        case UInt8(ascii: "t"): simple = 0x09
        case UInt8(ascii: "u"): simple = nil
        default: return false
        }
        if let simple {
            if keep { out.append(simple) }
            return true
        }
        guard var scalar = hexQuad() else { return false }
        if (0xD800...0xDBFF).contains(scalar) {
            // A high surrogate must be followed by an escaped low one.
            guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let low = hexQuad(),
                (0xDC00...0xDFFF).contains(low)
            else { return false }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            return false
        }
        if keep, let unicode = Unicode.Scalar(scalar), let encoded = UTF8.encode(unicode) {
            out.append(contentsOf: encoded)
        }
        return true
    }

    private mutating func hexQuad() -> UInt32? {
        guard bytes.count - index >= 4 else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Hex.value(of: bytes[index]) else { return nil }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    // MARK: Bytes

    /// Skips sixteen, then eight bytes at a time while none of them is a quote, a backslash or a control
    /// character (a base64 `sealed` is 3,912 of them); the byte loops take over from there.
    private mutating func skipPlainCharacters() {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        guard let base = bytes.baseAddress else { return }
        let raw = UnsafeRawPointer(base)
        // A byte is zero (found), or below 0x20, when subtracting sets its high bit that the byte
        // itself did not have.
        func special(_ word: UInt64) -> UInt64 {
            let quote = word ^ (ones &* 0x22)
            let backslash = word ^ (ones &* 0x5C)
            return ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- ones &* 0x20) & ~word)
        }
        // Two words a turn, judged together; the word loop then finds which one stopped it.
        while bytes.count - index >= 16 {
            let first = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            let second = raw.loadUnaligned(fromByteOffset: index + 8, as: UInt64.self)
            if (special(first) | special(second)) & highs != 0 { break }
            index += 16
        }
        while bytes.count - index >= 8 {
            if special(raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) & highs != 0 { return }
            index += 8
        }
    }

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// Whether `body` is valid UTF-8 (checked once, so that strings can be taken as they are).
    private static func isValidUTF8(_ body: [UInt8]) -> Bool {
        let ascii = body.withUnsafeBytes { raw -> Bool in
            var offset = 0
            var high: UInt64 = 0
            while raw.count - offset >= 16 {
                high |=
                    raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                    | raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)
                offset += 16
            }
            while raw.count - offset >= 8 {
                high |= raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                offset += 8
            }
            while offset < raw.count {
                high |= UInt64(raw[offset])
                offset += 1
            }
            return high & 0x8080_8080_8080_8080 == 0
        }
        return ascii || String(validating: body, as: UTF8.self) != nil
    }
}
