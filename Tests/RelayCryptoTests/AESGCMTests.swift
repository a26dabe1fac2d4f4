import Foundation
import RelayCrypto
import RelayTestSupport
import Testing

@Suite("AES-256-GCM")
struct AESGCMTests {
    /// AES-256 vectors from "The Galois/Counter Mode of Operation (GCM)", McGrew & Viega,
    /// test cases 13 to 16 (also in NIST's CAVS set).
    struct Vector: Sendable, CustomStringConvertible {
        let name: String
        let key: String
        let nonce: String
        let plaintext: String
        let aad: String
        let ciphertext: String
        let tag: String
        var description: String { name }
    }

    static let key15 = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308"
    static let plaintext15 =
        "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
        + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255"
    static let ciphertext15 =
        "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
        + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad"

    static let vectors: [Vector] = [
        Vector(
            name: "test case 13", key: String(repeating: "00", count: 32), nonce: String(repeating: "00", count: 12),
            plaintext: "", aad: "", ciphertext: "", tag: "530f8afbc74536b9a963b4f1c4cb738b"),
        Vector(
            name: "test case 14", key: String(repeating: "00", count: 32), nonce: String(repeating: "00", count: 12),
            plaintext: String(repeating: "00", count: 16), aad: "", ciphertext: "cea7403d4d606b6e074ec5d3baf39d18",
            tag: "d0d1c8a799996bf0265b98b5d48ab919"),
        Vector(
            name: "test case 15", key: key15, nonce: "cafebabefacedbaddecaf888", plaintext: plaintext15, aad: "",
            ciphertext: ciphertext15, tag: "b094dac5d93471bdec1a502270e3cc6c"),
        Vector(
            name: "test case 16", key: key15, nonce: "cafebabefacedbaddecaf888",
            plaintext: String(plaintext15.dropLast(8)), aad: "feedfacedeadbeeffeedfacedeadbeefabaddad2",
            ciphertext: String(ciphertext15.dropLast(8)), tag: "76fc6ece0f4e1768cddf8853bb2d551b"),
    ]

    @Test("seal matches the published vector", arguments: vectors)
    func sealMatchesVector(_ vector: Vector) throws {
        let key = try SymmetricKey(bytes: TestHex.bytes(vector.key))
        let sealed = try AES.GCM.seal(
            TestHex.bytes(vector.plaintext), using: key, nonce: TestHex.bytes(vector.nonce),
            authenticating: TestHex.bytes(vector.aad))
        #expect(TestHex.string(sealed.ciphertext) == vector.ciphertext)
        #expect(TestHex.string(sealed.tag) == vector.tag)
    }

    @Test("open recovers the published plaintext", arguments: vectors)
    func openMatchesVector(_ vector: Vector) throws {
        let key = try SymmetricKey(bytes: TestHex.bytes(vector.key))
        let plaintext = try AES.GCM.open(
            ciphertext: TestHex.bytes(vector.ciphertext), tag: TestHex.bytes(vector.tag),
            nonce: TestHex.bytes(vector.nonce), using: key,
            authenticating: TestHex.bytes(vector.aad))
        #expect(TestHex.string(plaintext) == vector.plaintext)
    }

    /// Test case 16 with one bit flipped in one of its inputs.
    enum Tampered: CaseIterable, Sendable {
        case ciphertext, tag, aad, nonce, key
    }

    @Test("a flipped bit anywhere fails authentication", arguments: Tampered.allCases, [0, 7, 63])
    func tamperedInputFails(_ part: Tampered, bit: Int) throws {
        let vector = Self.vectors[3]
        var key = TestHex.bytes(vector.key)
        var nonce = TestHex.bytes(vector.nonce)
        var aad = TestHex.bytes(vector.aad)
        var ciphertext = TestHex.bytes(vector.ciphertext)
        var tag = TestHex.bytes(vector.tag)
        func flip(_ bytes: inout [UInt8]) { bytes[(bit / 8) % bytes.count] ^= 1 << (bit % 8) }
        switch part {
        case .ciphertext: flip(&ciphertext)
        case .tag: flip(&tag)
        case .aad: flip(&aad)
        case .nonce: flip(&nonce)
        case .key: flip(&key)
        }
        let symmetricKey = try SymmetricKey(bytes: key)
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try AES.GCM.open(ciphertext: ciphertext, tag: tag, nonce: nonce, using: symmetricKey, authenticating: aad)
        }
    }

    @Test("missing or extra associated data fails authentication")
    func associatedDataMustMatch() throws {
        let key = SymmetricKey.generate()
        let nonce = SecureRandom.bytes(count: 12)
        let sealed = try AES.GCM.seal(Array("hello".utf8), using: key, nonce: nonce, authenticating: [0x01, 0x07])
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try AES.GCM.open(
                ciphertext: sealed.ciphertext, tag: sealed.tag, nonce: nonce, using: key, authenticating: [])
        }
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try AES.GCM.open(
                ciphertext: sealed.ciphertext, tag: sealed.tag, nonce: nonce, using: key,
                authenticating: [0x01, 0x07, 0x00])
        }
        let opened = try AES.GCM.open(
            ciphertext: sealed.ciphertext, tag: sealed.tag, nonce: nonce, using: key, authenticating: [0x01, 0x07])
        #expect(opened == Array("hello".utf8))
    }

    @Test("a truncated ciphertext or tag fails authentication")
    func truncationFails() throws {
        let key = SymmetricKey.generate()
        let nonce = SecureRandom.bytes(count: 12)
        let sealed = try AES.GCM.seal(SecureRandom.bytes(count: 100), using: key, nonce: nonce, authenticating: [])
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try AES.GCM.open(
                ciphertext: sealed.ciphertext.dropLast(), tag: sealed.tag, nonce: nonce, using: key, authenticating: [])
        }
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try AES.GCM.open(
                ciphertext: sealed.ciphertext, tag: sealed.tag.dropLast(), nonce: nonce, using: key, authenticating: [])
        }
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try AES.GCM.open(ciphertext: sealed.ciphertext, tag: [], nonce: nonce, using: key, authenticating: [])
        }
    }

    @Test(
        "round trip over Data, Array and ArraySlice inputs of many sizes", arguments: [0, 1, 15, 16, 17, 2934, 70_000])
    func roundTrip(size: Int) throws {
        let key = SymmetricKey.generate()
        let nonce = Data(SecureRandom.bytes(count: 12))
        let plaintext = SecureRandom.bytes(count: size)
        let aad = [UInt8](repeating: 0xAB, count: 3)[1...]
        let sealed = try AES.GCM.seal(Data(plaintext), using: key, nonce: nonce, authenticating: aad)
        #expect(sealed.ciphertext.count == size)
        #expect(sealed.tag.count == 16)
        if size >= 16 { #expect(sealed.ciphertext != plaintext) }
        let opened = try AES.GCM.open(
            ciphertext: sealed.ciphertext[...], tag: Data(sealed.tag), nonce: Array(nonce), using: key,
            authenticating: Array(aad))
        #expect(opened == plaintext)
    }

    @Test("a nonce that is not 12 bytes is rejected", arguments: [0, 8, 11, 13, 16])
    func nonceSize(size: Int) throws {
        let key = SymmetricKey.generate()
        #expect(throws: CryptoError(.invalidNonce, "")) {
            try AES.GCM.seal([1, 2, 3], using: key, nonce: [UInt8](repeating: 0, count: size), authenticating: [])
        }
        #expect(throws: CryptoError(.invalidNonce, "")) {
            try AES.GCM.open(
                ciphertext: [1, 2, 3], tag: [UInt8](repeating: 0, count: 16), nonce: [UInt8](repeating: 0, count: size),
                using: key, authenticating: [])
        }
    }

    /// A key keeps the contexts that opened its messages for its next ones (only the nonce changes): every
    /// message opens as it would with a fresh context, whatever was opened or refused before it, and under
    /// whichever of two keys.
    @Test("messages opened one after another, some altered, under two keys, each open as if alone")
    func keptContextsOpenEachMessageAlone() throws {
        let keys = [SymmetricKey.generate(), SymmetricKey.generate()]
        struct Message {
            let key: Int
            let nonce: [UInt8]
            let aad: [UInt8]
            let plaintext: [UInt8]
            let sealed: AES.GCM.Sealed
        }
        var generator = SplitMix64(seed: 0x6763_6D21)
        let messages = try (0..<64).map { index in
            let key = index % 3 == 0 ? 1 : 0
            let plaintext = (0..<(index == 5 ? 2934 : index)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let nonce = (0..<12).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let aad = [UInt8(index), UInt8(key)]
            let sealed = try AES.GCM.seal(plaintext, using: keys[key], nonce: nonce, authenticating: aad)
            return Message(key: key, nonce: nonce, aad: aad, plaintext: plaintext, sealed: sealed)
        }
        for (index, message) in messages.enumerated() {
            if index % 4 == 1 {
                // Refused first: an altered tag, then the other key.
                var tag = message.sealed.tag
                tag[index % tag.count] ^= 0x01
                #expect(throws: CryptoError.self) {
                    try AES.GCM.open(
                        ciphertext: message.sealed.ciphertext, tag: tag, nonce: message.nonce,
                        using: keys[message.key], authenticating: message.aad)
                }
                #expect(throws: CryptoError.self) {
                    try AES.GCM.open(
                        ciphertext: message.sealed.ciphertext, tag: message.sealed.tag, nonce: message.nonce,
                        using: keys[1 - message.key], authenticating: message.aad)
                }
            }
            let opened = try AES.GCM.open(
                ciphertext: message.sealed.ciphertext, tag: message.sealed.tag, nonce: message.nonce,
                using: keys[message.key], authenticating: message.aad)
            #expect(opened == message.plaintext, "message \(index)")
            // The previous message, again: its nonce, not this one's, is the one that counts.
            if index > 0 {
                let previous = messages[index - 1]
                let again = try AES.GCM.open(
                    ciphertext: previous.sealed.ciphertext, tag: previous.sealed.tag, nonce: previous.nonce,
                    using: keys[previous.key], authenticating: previous.aad)
                #expect(again == previous.plaintext, "message \(index - 1), again")
            }
        }
    }

    /// The tasks share the key, so they take its kept contexts in turn: each task opens its own message and,
    /// in between, refuses an altered one.
    @Test("concurrent opens from many tasks all succeed")
    func concurrentOpens() async throws {
        let key = SymmetricKey.generate()
        let messages = try (0..<8).map { task in
            let nonce = SecureRandom.bytes(count: 12)
            let plaintext = SecureRandom.bytes(count: 2934 - task)
            return (nonce, plaintext, try AES.GCM.seal(plaintext, using: key, nonce: nonce, authenticating: [1, 0]))
        }
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for (nonce, plaintext, sealed) in messages {
                group.addTask {
                    var altered = sealed.ciphertext
                    altered[0] ^= 0x80
                    for _ in 0..<200 {
                        let opened = try AES.GCM.open(
                            ciphertext: sealed.ciphertext, tag: sealed.tag, nonce: nonce, using: key,
                            authenticating: [1, 0])
                        if opened != plaintext { return false }
                        let refused = try? AES.GCM.open(
                            ciphertext: altered, tag: sealed.tag, nonce: nonce, using: key, authenticating: [1, 0])
                        if refused != nil { return false }
                    }
                    return true
                }
            }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: true, count: 8))
    }
}
