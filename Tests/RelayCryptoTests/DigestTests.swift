import Foundation
import RelayCrypto
import RelayTestSupport
import Testing

@Suite("SHA-256, SHA-1 and HMAC-SHA256")
struct DigestTests {
    @Test("FIPS 180 SHA-256 examples")
    func sha256KnownAnswers() {
        #expect(
            TestHex.string(SHA256.hash(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            TestHex.string(SHA256.hash([UInt8]())) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        )
        #expect(
            TestHex.string(SHA256.hash(Data("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test("SHA-256 of one million 'a'")
    func sha256MillionA() {
        let input = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(
            TestHex.string(SHA256.hash(input)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// SHA-1 names Redis's scripts (`EVALSHA`), nothing more.
    @Test("FIPS 180 SHA-1 examples")
    func sha1KnownAnswers() {
        #expect(TestHex.string(SHA1.hash(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(TestHex.string(SHA1.hash([UInt8]())) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(
            TestHex.string(SHA1.hash(Data("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
    }

    struct HMACVector: Sendable, CustomStringConvertible {
        let number: Int
        let key: [UInt8]
        let data: [UInt8]
        let mac: String
        var description: String { "RFC 4231 test case \(number)" }
    }

    static let rfc4231: [HMACVector] = [
        HMACVector(
            number: 1, key: [UInt8](repeating: 0x0B, count: 20), data: Array("Hi There".utf8),
            mac: "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        HMACVector(
            number: 2, key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8),
            mac: "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        HMACVector(
            number: 3, key: [UInt8](repeating: 0xAA, count: 20), data: [UInt8](repeating: 0xDD, count: 50),
            mac: "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        HMACVector(
            number: 4, key: Array(1...25), data: [UInt8](repeating: 0xCD, count: 50),
            mac: "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        HMACVector(
            number: 6, key: [UInt8](repeating: 0xAA, count: 131),
            data: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
            mac: "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        HMACVector(
            number: 7, key: [UInt8](repeating: 0xAA, count: 131),
            data: Array(
                ("This is a test using a larger than block-size key and a larger than block-size data. "
                    + "The key needs to be hashed before being used by the HMAC algorithm.").utf8),
            mac: "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
    ]

    @Test("RFC 4231 HMAC-SHA256", arguments: rfc4231)
    func hmacKnownAnswers(_ vector: HMACVector) {
        #expect(TestHex.string(HMACSHA256.authenticationCode(for: vector.data, using: vector.key)) == vector.mac)
        #expect(
            TestHex.string(HMACSHA256.authenticationCode(for: Data(vector.data), using: vector.key[...])) == vector.mac)
    }

    @Test("A key kept for many codes gives each code as the one-shot does, from several threads at once")
    func hmacKeptKey() async {
        let vectors = Self.rfc4231
        let keys = vectors.map { HMACSHA256.Key($0.key) }
        await withTaskGroup(of: [String].self) { group in
            for _ in 0..<4 {
                group.addTask {
                    var codes: [String] = []
                    for _ in 0..<50 {
                        for (vector, key) in zip(vectors, keys) {
                            codes.append(TestHex.string(key.authenticationCode(for: vector.data)))
                        }
                    }
                    return codes
                }
            }
            for await codes in group {
                #expect(codes.count == 50 * vectors.count)
                for (index, code) in codes.enumerated() {
                    #expect(code == vectors[index % vectors.count].mac)
                }
            }
        }
    }

    @Test("HMAC with an empty key and empty data")
    func hmacEmpty() {
        // Computed independently: `printf '' | openssl dgst -sha256 -mac HMAC -macopt hexkey:`
        #expect(
            TestHex.string(HMACSHA256.authenticationCode(for: [UInt8](), using: [UInt8]()))
                == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }
}
