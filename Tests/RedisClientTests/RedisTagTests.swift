import Testing

@testable import RedisClient

/// Request tags on the wire: 16 lowercase hex digits, read back exactly, anything else refused.
@Suite struct RedisTagTests {
    @Test func aTagReadsBackAsWritten() {
        for tag: UInt64 in [0, 1, 0xff, 0x0123_4567_89ab_cdef, .max] {
            let bytes = RedisTag.bytes(tag)
            #expect(bytes.count == 16)
            #expect(bytes.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
            #expect(bytes.withUnsafeBytes { RedisTag.parse($0) } == tag)
        }
        #expect(String(decoding: RedisTag.bytes(0xab), as: UTF8.self) == "00000000000000ab")
    }

    @Test func anythingElseIsNoTag() {
        for text in [
            "", "0", "000000000000000", "00000000000000000", "00000000000000AB", "0000000000000 ab", "000000000000000g",
        ] {
            #expect(Array(text.utf8).withUnsafeBytes { RedisTag.parse($0) } == nil, "\(text)")
        }
    }
}
