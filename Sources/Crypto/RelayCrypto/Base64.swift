import Foundation

/// Base64 (RFC 4648 §4) and base64url (RFC 4648 §5) in pure Swift over UTF-8.
///
/// Decoding is strict: only the one canonical encoding of a byte string is accepted. No
/// whitespace, no line breaks, no mixed alphabets; padding exactly as the encoder writes it;
/// unused low bits of the last character must be zero. Anything else returns nil, so a value
/// has exactly one textual form.
public enum Base64 {
    /// Encodes with the standard alphabet (`+`, `/`) and `=` padding.
    public static func encode(_ bytes: some ContiguousBytes) -> String {
        bytes.withUnsafeBytes { encode($0, alphabet: standardAlphabet, padding: true) }
    }

    /// Decodes canonical standard base64 with padding; nil for anything else.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        withUTF8(of: text) { decode($0, table: standardTable, padding: true) }
    }

    /// Decodes canonical standard base64 with padding given as UTF-8 (or ASCII) bytes; nil for
    /// anything else.
    public static func decode(_ utf8: some ContiguousBytes) -> [UInt8]? {
        utf8.withUnsafeBytes { decode($0, table: standardTable, padding: true) }
    }

    /// How many bytes canonical standard base64 with padding decodes to, or nil for anything that
    /// `decode` refuses: the same checks, without producing the bytes.
    public static func decodedCount(_ text: some StringProtocol) -> Int? {
        withUTF8(of: text) { decodedCount($0) }
    }

    private static func decodedCount(_ input: UnsafeRawBufferPointer) -> Int? {
        // Eight characters at a time while they are plainly in the alphabet (the last group,
        // which may hold padding, left out); `validate` judges the rest as `decode` would.
        let offset = ASCIIWord.acceptedPrefix(input, reserving: 8) { word in
            ASCIIWord.inRange(word, 0x41, 0x5A) | ASCIIWord.inRange(word, 0x61, 0x7A)
                | ASCIIWord.inRange(word, 0x2F, 0x39) | ASCIIWord.inRange(word, 0x2B, 0x2B)  // A-Z a-z /0-9 +
        }
        return validate(input, table: standardTable, padding: true, from: offset)
    }

    /// `decode` for a `String` (what the relay's callers hold): the generic one, called from another module,
    /// runs unspecialized and looks up type metadata on every call.
    public static func decode(_ text: String) -> [UInt8]? {
        withUTF8(of: text) { decode($0, table: standardTable, padding: true) }
    }

    /// `decodedCount` for a `String`, specialized as `decode(_:)` for a `String` is.
    public static func decodedCount(_ text: String) -> Int? {
        withUTF8(of: text) { decodedCount($0) }
    }

    /// `urlDecode` for a `String`, specialized as `decode(_:)` for a `String` is.
    public static func urlDecode(_ text: String) -> [UInt8]? {
        withUTF8(of: text) { decode($0, table: urlTable, padding: false) }
    }

    /// Encodes with the URL-safe alphabet (`-`, `_`) and no padding.
    public static func urlEncode(_ bytes: some ContiguousBytes) -> String {
        bytes.withUnsafeBytes { encode($0, alphabet: urlAlphabet, padding: false) }
    }

    /// Decodes canonical base64url without padding; nil for anything else (including `=`).
    public static func urlDecode(_ text: some StringProtocol) -> [UInt8]? {
        withUTF8(of: text) { decode($0, table: urlTable, padding: false) }
    }

    /// Decodes canonical base64url without padding given as UTF-8 (or ASCII) bytes; nil for
    /// anything else (including `=`).
    public static func urlDecode(_ utf8: some ContiguousBytes) -> [UInt8]? {
        utf8.withUnsafeBytes { decode($0, table: urlTable, padding: false) }
    }

    // MARK: - Tables

    private static let standardAlphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlAlphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Marks a byte that is not in the alphabet.
    private static let invalid: UInt8 = 0xFF
    private static let standardTable = decodingTable(for: standardAlphabet)
    private static let urlTable = decodingTable(for: urlAlphabet)
    private static let paddingCharacter = UInt8(ascii: "=")

    private static func decodingTable(for alphabet: [UInt8]) -> [UInt8] {
        var table = [UInt8](repeating: invalid, count: 256)
        for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }

    // MARK: - Implementation

    @inline(__always)
    private static func withUTF8<S: StringProtocol, Result>(
        of text: S, _ body: (UnsafeRawBufferPointer) -> Result
    ) -> Result {
        if let result = text.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return Array(text.utf8).withUnsafeBytes(body)
    }

    private static func encode(_ input: UnsafeRawBufferPointer, alphabet: [UInt8], padding: Bool) -> String {
        let fullGroups = input.count / 3
        let remainder = input.count % 3
        let outputCount = fullGroups * 4 + (remainder == 0 ? 0 : (padding ? 4 : remainder + 1))
        if outputCount == 0 { return "" }
        return alphabet.withUnsafeBufferPointer { symbols in
            String(unsafeUninitializedCapacity: outputCount) { out in
                var i = 0
                var o = 0
                while i + 3 <= input.count {
                    let value = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                    out[o] = symbols[Int(value >> 18)]
                    out[o + 1] = symbols[Int(value >> 12 & 0x3F)]
                    out[o + 2] = symbols[Int(value >> 6 & 0x3F)]
                    out[o + 3] = symbols[Int(value & 0x3F)]
                    i += 3
                    o += 4
                }
                if remainder == 1 {
                    let value = UInt32(input[i]) << 16
                    out[o] = symbols[Int(value >> 18)]
                    out[o + 1] = symbols[Int(value >> 12 & 0x3F)]
                    o += 2
                    if padding {
                        out[o] = paddingCharacter
                        out[o + 1] = paddingCharacter
                        o += 2
                    }
                } else if remainder == 2 {
                    let value = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
                    out[o] = symbols[Int(value >> 18)]
                    out[o + 1] = symbols[Int(value >> 12 & 0x3F)]
                    out[o + 2] = symbols[Int(value >> 6 & 0x3F)]
                    o += 3
                    if padding {
                        out[o] = paddingCharacter
                        o += 1
                    }
                }
                return o
            }
        }
    }

    /// The shape of an encoded text: its significant characters (padding removed), the characters
    /// of its last, partial group (0 when none), and the decoded length; nil when the length or the
    /// padding cannot be canonical.
    private static func shape(of input: UnsafeRawBufferPointer, padding: Bool) -> (
        count: Int, tail: Int, outputCount: Int
    )? {
        var count = input.count
        if padding {
            guard count % 4 == 0 else { return nil }
            if count > 0 && input[count - 1] == paddingCharacter {
                count -= input[count - 2] == paddingCharacter ? 2 : 1
            }
        } else {
            guard count % 4 != 1 else { return nil }
        }
        let tail = count % 4
        return (count, tail, count / 4 * 3 + (tail == 0 ? 0 : tail - 1))
    }

    private static func decode(_ input: UnsafeRawBufferPointer, table: [UInt8], padding: Bool) -> [UInt8]? {
        guard let (count, tail, outputCount) = shape(of: input, padding: padding) else { return nil }
        if count == 0 { return [] }
        let fullGroups = count / 4

        return table.withUnsafeBufferPointer { table -> [UInt8]? in
            var valid = true
            let output = [UInt8](unsafeUninitializedCapacity: outputCount) { out, initialized in
                var i = 0
                var o = 0
                // OR of all looked-up values: any `invalid` entry sets the top bits.
                var seen: UInt8 = 0
                for _ in 0..<fullGroups {
                    let a = table[Int(input[i])]
                    let b = table[Int(input[i + 1])]
                    let c = table[Int(input[i + 2])]
                    let d = table[Int(input[i + 3])]
                    seen |= a | b | c | d
                    let value = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    out[o] = UInt8(truncatingIfNeeded: value >> 16)
                    out[o + 1] = UInt8(truncatingIfNeeded: value >> 8)
                    out[o + 2] = UInt8(truncatingIfNeeded: value)
                    i += 4
                    o += 3
                }
                if tail == 2 {
                    let a = table[Int(input[i])]
                    let b = table[Int(input[i + 1])]
                    seen |= a | b
                    // The low 4 bits of the second character are unused and must be zero.
                    if b & 0x0F != 0 { valid = false }
                    out[o] = a << 2 | b >> 4
                    o += 1
                } else if tail == 3 {
                    let a = table[Int(input[i])]
                    let b = table[Int(input[i + 1])]
                    let c = table[Int(input[i + 2])]
                    seen |= a | b | c
                    // The low 2 bits of the third character are unused and must be zero.
                    if c & 0x03 != 0 { valid = false }
                    out[o] = a << 2 | b >> 4
                    out[o + 1] = b << 4 | c >> 2
                    o += 2
                }
                if seen & 0xC0 != 0 { valid = false }
                initialized = o
            }
            return valid ? output : nil
        }
    }

    /// `decode`'s checks without its output: the decoded length, or nil. The characters before
    /// `start` (a multiple of 4, before the last group) are already known to be in the alphabet.
    private static func validate(
        _ input: UnsafeRawBufferPointer, table: [UInt8], padding: Bool, from start: Int = 0
    ) -> Int? {
        guard let (count, tail, outputCount) = shape(of: input, padding: padding) else { return nil }
        let fullCount = count - tail
        return table.withUnsafeBufferPointer { table -> Int? in
            var seen: UInt8 = 0
            var i = start
            while i < fullCount {
                seen |=
                    table[Int(input[i])] | table[Int(input[i + 1])] | table[Int(input[i + 2])]
                    | table[Int(input[i + 3])]
                i += 4
            }
            if tail == 2 {
                let b = table[Int(input[i + 1])]
                seen |= table[Int(input[i])] | b
                if b & 0x0F != 0 { return nil }
            } else if tail == 3 {
                let c = table[Int(input[i + 2])]
                seen |= table[Int(input[i])] | table[Int(input[i + 1])] | c
                if c & 0x03 != 0 { return nil }
            }
            guard seen & 0xC0 == 0 else { return nil }
            return outputCount
        }
    }
}
