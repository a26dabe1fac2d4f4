import Testing

@testable import RelayCore

@Suite struct HexTests {
    /// `isHex` reads eight characters at a time: every ASCII byte and a non-ASCII one, at every
    /// position of a 64-digit text (the length of `id` and `thread`), is judged as one at a time.
    @Test func isHexJudgesEveryCharacterAtEveryPosition() {
        let digits = Set("0123456789abcdefABCDEF".utf8)
        let valid = Array(String(repeating: "0123456789abcdefABCDEF", count: 3).utf8.prefix(64))
        #expect(Hex.isHex(String(decoding: valid, as: UTF8.self), count: 64))
        for position in valid.indices {
            for byte in UInt8(0)...UInt8(0x7F) {
                var text = valid
                text[position] = byte
                let expected = digits.contains(byte)
                #expect(
                    Hex.isHex(String(decoding: text, as: UTF8.self), count: 64) == expected, "\(byte) at \(position)")
            }
            var accented = valid
            accented.replaceSubrange(position...position, with: Array("é".utf8))
            #expect(!Hex.isHex(String(decoding: accented, as: UTF8.self), count: 65))
        }
        #expect(!Hex.isHex(String(decoding: valid, as: UTF8.self), count: 63))
        #expect(Hex.isHex(Substring(String(decoding: valid, as: UTF8.self)), count: 64))
    }

    @Test func encodeWritesLowercaseAfterThePrefix() {
        #expect(Hex.encode([0x00, 0x9F, 0xA0, 0xFF]) == "009fa0ff")
        #expect(Hex.encode([0xAB, 0x01], after: "/3/device/") == "/3/device/ab01")
        #expect(Hex.encode([], after: "/x") == "/x")
        #expect(Hex.encode([UInt8]()) == "")
    }
}
