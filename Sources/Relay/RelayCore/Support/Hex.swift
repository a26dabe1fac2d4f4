import RelayCrypto

/// Hexadecimal text for device tokens and identifiers.
public enum Hex {
    /// Decodes hex of either case; nil for odd length or any non-hex character.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        decode(bytes: text.utf8)
    }

    private static func decode(bytes: some Collection<UInt8>) -> [UInt8]? {
        guard bytes.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(bytes.count / 2)
        var high: UInt8? = nil
        for byte in bytes {
            guard let nibble = value(of: byte) else { return nil }
            if let h = high {
                out.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return out
    }

    /// True when `text` is exactly `count` hex digits of either case.
    public static func isHex(_ text: some StringProtocol, count: Int) -> Bool {
        guard text.utf8.count == count else { return false }
        // Over the string's own storage when it has one (the generic UTF8View walk costs 5x more).
        return text.utf8.withContiguousStorageIfAvailable { isHex(UnsafeRawBufferPointer($0)) }
            ?? text.utf8.allSatisfy(isDigit)
    }

    /// Eight characters at a time, then one at a time.
    private static func isHex(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let offset = ASCIIWord.acceptedPrefix(bytes) { word in
            ASCIIWord.inRange(word, 0x30, 0x39) | ASCIIWord.inRange(word, 0x61, 0x66)
                | ASCIIWord.inRange(word, 0x41, 0x46)  // 0-9 a-f A-F
        }
        return bytes[offset...].allSatisfy(isDigit)
    }

    /// Lowercase hex.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        encode(Array(bytes), after: "")
    }

    /// `prefix` followed by the lowercase hex of `bytes`, built in place.
    static func encode(_ bytes: [UInt8], after prefix: StaticString) -> String {
        let prefixCount = prefix.utf8CodeUnitCount
        return String(unsafeUninitializedCapacity: prefixCount + bytes.count * 2) { out in
            for index in 0..<prefixCount { out[index] = prefix.utf8Start[index] }
            var o = prefixCount
            for byte in bytes {
                out[o] = digits[Int(byte >> 4)]
                out[o + 1] = digits[Int(byte & 0x0f)]
                o += 2
            }
            return o
        }
    }

    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    @inline(__always)
    private static func isDigit(_ byte: UInt8) -> Bool { value(of: byte) != nil }

    static func value(of byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte &- UInt8(ascii: "A") &+ 10
        default: nil
        }
    }
}
