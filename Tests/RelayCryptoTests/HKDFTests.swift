import RelayCrypto
import RelayTestSupport
import Testing

@Suite("HKDF-SHA256")
struct HKDFTests {
    @Test("RFC 5869 test case 1")
    func rfc5869Case1() {
        let okm = HKDFSHA256.deriveKey(
            from: TestHex.bytes("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b"),
            salt: TestHex.bytes("000102030405060708090a0b0c"),
            info: TestHex.bytes("f0f1f2f3f4f5f6f7f8f9"), count: 42)
        #expect(
            TestHex.string(okm)
                == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
    }

    @Test("RFC 5869 test case 3: no salt, no info")
    func rfc5869Case3() {
        let okm = HKDFSHA256.deriveKey(
            from: TestHex.bytes("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b"), info: [], count: 42)
        #expect(
            TestHex.string(okm)
                == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
    }
}
