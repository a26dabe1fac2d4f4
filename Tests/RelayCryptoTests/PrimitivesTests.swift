import Foundation
import RelayCrypto
import Testing

@Suite("Keys, randomness and constant-time comparison")
struct PrimitivesTests {
    @Test("a symmetric key must be 32 bytes", arguments: [0, 1, 16, 24, 31, 33, 64])
    func keySize(size: Int) {
        #expect(throws: CryptoError(.invalidKey, "")) {
            try SymmetricKey(bytes: [UInt8](repeating: 7, count: size))
        }
    }

    @Test("a 32-byte key keeps its bytes and compares by value")
    func keyBytes() throws {
        let bytes = Array(0..<32).map { UInt8($0) }
        let key = try SymmetricKey(bytes: Data(bytes))
        #expect(key.byteCount == 32)
        #expect(key.withUnsafeBytes { Array($0) } == bytes)
        #expect(key == (try SymmetricKey(bytes: bytes[...])))
        var other = bytes
        other[31] ^= 1
        #expect(key != (try SymmetricKey(bytes: other)))
        #expect(!String(describing: key).contains("0001"))
    }

    @Test("generated keys are 32 bytes and differ")
    func generatedKeys() {
        let a = SymmetricKey.generate()
        let b = SymmetricKey.generate()
        #expect(a.byteCount == 32)
        #expect(a != b)
        #expect(a == a)
    }

    @Test("random bytes have the requested length and differ between calls")
    func randomBytes() {
        #expect(SecureRandom.bytes(count: 0).isEmpty)
        #expect(SecureRandom.bytes(count: 1000).count == 1000)
        #expect(SecureRandom.bytes(count: 32) != SecureRandom.bytes(count: 32))
    }

    @Test("constant-time comparison")
    func constantTime() {
        #expect(constantTimeEquals([1, 2, 3] as [UInt8], Data([1, 2, 3])))
        #expect(constantTimeEquals([UInt8](), Data()))
        #expect(!constantTimeEquals([1, 2, 3] as [UInt8], [1, 2, 4] as [UInt8]))
        #expect(!constantTimeEquals([1, 2, 3] as [UInt8], [1, 2] as [UInt8]))
        #expect(!constantTimeEquals([UInt8](), [0] as [UInt8]))
        #expect(constantTimeEquals(([9, 1, 2] as [UInt8])[1...], [1, 2] as [UInt8]))
    }

    @Test("errors compare by code and describe themselves")
    func errorEquality() {
        #expect(CryptoError(.invalidKey, "a") == CryptoError(.invalidKey, "b"))
        #expect(CryptoError(.invalidKey, "a") != CryptoError(.invalidNonce, "a"))
        #expect(CryptoError(.invalidPEM, "no key").description == "invalidPEM: no key")
    }
}
