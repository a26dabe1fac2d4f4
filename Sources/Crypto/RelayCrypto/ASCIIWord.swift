/// Classifies eight ASCII bytes at once, packed in a `UInt64` (SWAR): the validators of base64 and
/// hex text run over thousands of characters per push, where a byte-table lookup each is measurable.
public enum ASCIIWord {
    /// `0x80` in every byte: the flag each test sets per byte.
    public static let highBits: UInt64 = 0x8080_8080_8080_8080
    @usableFromInline static let ones: UInt64 = 0x0101_0101_0101_0101

    /// How many leading bytes of `bytes`, in whole words of eight, are ASCII and accepted by
    /// `accepted` (which returns the high bit of each byte it accepts, see `inRange`), leaving at
    /// least `reserved` bytes unread. The caller judges the rest one byte at a time.
    @inlinable
    public static func acceptedPrefix(
        _ bytes: UnsafeRawBufferPointer, reserving reserved: Int = 0, _ accepted: (UInt64) -> UInt64
    ) -> Int {
        var offset = 0
        // Two words a turn, judged together: one branch and one bound check for sixteen bytes.
        while bytes.count - offset >= reserved + 16 {
            let first = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            let second = bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)
            guard (first | second) & highBits == 0, accepted(first) & accepted(second) == highBits else { break }
            offset += 16
        }
        while bytes.count - offset >= reserved + 8 {
            let word = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            guard word & highBits == 0, accepted(word) == highBits else { break }
            offset += 8
        }
        return offset
    }

    /// The high bit of each byte of `word` set where `low <= byte <= high`. Every byte of `word`
    /// must be below 0x80 (check `word & highBits == 0` first), and `low <= high < 0x80`: then no
    /// sum carries into the next byte.
    @inlinable
    public static func inRange(_ word: UInt64, _ low: UInt8, _ high: UInt8) -> UInt64 {
        let atLeastLow = word &+ ones &* UInt64(0x80 &- low)
        let aboveHigh = word &+ ones &* UInt64(0x7F &- high)
        return atLeastLow & ~aboveHigh & highBits
    }
}
