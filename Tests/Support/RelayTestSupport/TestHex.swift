/// Hexadecimal text for tests, written apart from RelayCore's `Hex` so that the code under test is
/// never its own reference.
public enum TestHex {
    /// The bytes a hex constant spells (whitespace ignored); traps on anything else, since a test's own
    /// constant is wrong then.
    public static func bytes(_ text: String) -> [UInt8] {
        guard let bytes = decode(text.filter { !$0.isWhitespace }) else { preconditionFailure("bad hex: \(text)") }
        return bytes
    }

    /// The bytes of `text`, digits of either case only; nil for an odd length or any other character.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    /// Two digits a byte, lowercase unless `uppercase`.
    public static func string(_ bytes: some Sequence<UInt8>, uppercase: Bool = false) -> String {
        let digits = Array((uppercase ? "0123456789ABCDEF" : "0123456789abcdef").utf8)
        var text: [UInt8] = []
        for byte in bytes { text += [digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]] }
        return String(decoding: text, as: UTF8.self)
    }

    /// `byteCount` random bytes in hex: a fresh device token or push `id`.
    public static func random(byteCount: Int = 32, uppercase: Bool = false) -> String {
        string((0..<byteCount).map { _ in UInt8.random(in: 0...255) }, uppercase: uppercase)
    }

    private static func value(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
