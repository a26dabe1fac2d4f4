/// Classifies eight ASCII bytes at once, packed in a `UInt64` (SWAR): the validators of base64 and
/// hex text run over thousands of characters per push, a byte-table lookup each was measurable.
public enum ASCIIWord {
    /// `0x80` in every byte: the flag each test sets per byte.
    public static let highBits: UInt64 = 0x8080_8080_8080_8080
    static let ones: UInt64 = 0x0101_0101_0101_0101

    /// The eight bytes at `offset` (any alignment).
    @inline(__always)
    public static func load(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt64 {
        bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
    }

    /// The high bit of each byte of `word` set where `low <= byte <= high`. Every byte of `word`
    /// must be below 0x80 (check `word & highBits == 0` first), and `low <= high < 0x80`: then no
    /// sum carries into the next byte.
    @inline(__always)
    public static func inRange(_ word: UInt64, _ low: UInt8, _ high: UInt8) -> UInt64 {
        let atLeastLow = word &+ ones &* UInt64(0x80 &- low)
        let aboveHigh = word &+ ones &* UInt64(0x7F &- high)
        return atLeastLow & ~aboveHigh & highBits
    }
}
