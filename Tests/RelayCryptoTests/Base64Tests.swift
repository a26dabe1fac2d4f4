import Foundation
import RelayCrypto
import Testing

@Suite("Base64 and base64url")
struct Base64Tests {
    /// RFC 4648 §10 test vectors.
    static let rfc4648: [(String, String)] = [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ]

    @Test("RFC 4648 vectors encode and decode")
    func rfcVectors() {
        for (plain, encoded) in Self.rfc4648 {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(Base64.decode(encoded) == Array(plain.utf8))
            #expect(Base64.decode(Array(encoded.utf8)) == Array(plain.utf8))
            let unpadded = encoded.replacingOccurrences(of: "=", with: "")
            #expect(Base64.urlEncode(Array(plain.utf8)) == unpadded)
            #expect(Base64.urlDecode(unpadded) == Array(plain.utf8))
            #expect(Base64.urlDecode(Data(unpadded.utf8)) == Array(plain.utf8))
        }
    }

    @Test("the two alphabets differ only in the last two symbols")
    func alphabets() {
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF]
        #expect(Base64.encode(bytes) == "+/+/")
        #expect(Base64.urlEncode(bytes) == "-_-_")
        #expect(Base64.decode("+/+/") == bytes)
        #expect(Base64.urlDecode("-_-_") == bytes)
        #expect(Base64.decode("-_-_") == nil)
        #expect(Base64.urlDecode("+/+/") == nil)
    }

    @Test("random round trips agree with Foundation", arguments: 0..<64)
    func roundTrip(size: Int) {
        let bytes = SecureRandom.bytes(count: size * 7)
        let standard = Base64.encode(bytes)
        #expect(standard == Data(bytes).base64EncodedString())
        #expect(Base64.decode(standard) == bytes)
        let url = Base64.urlEncode(bytes)
        #expect(!url.contains("=") && !url.contains("+") && !url.contains("/"))
        #expect(Base64.urlDecode(url) == bytes)
        #expect(Base64.urlDecode(url[...]) == bytes)
    }

    @Test(
        "non-canonical standard base64 is rejected",
        arguments: [
            "Zg", "Zg=", "Zg===", "Zm8", "Zm9vYg", "=", "==", "===", "====", "Zg==Zg==", "Z===", "Zm=v", "Zm9v=",
            " Zm9v", "Zm9v ", "Zm 9v", "Zm9v\n", "Zm\r\n9v", "Zm9v\t", "Zh==", "Zm9=", "Zm-v", "Zm_v", "Zm9v!",
            "Zm9vYmFy=", "Zm9vYmFy====", "Zm9\u{00E9}",
        ])
    func strictStandard(_ text: String) {
        #expect(Base64.decode(text) == nil)
        #expect(Base64.decode(Array(text.utf8)) == nil)
        #expect(Base64.decodedCount(text) == nil)
    }

    @Test(
        "non-canonical base64url is rejected",
        arguments: [
            "Zg==", "Zm8=", "Z", "Zm9vY", "=", "Zh", "Zm9", "Zm+v", "Zm/v", " Zm9v", "Zm9v ", "Zm\n9v", "Zm9v=",
            "Zm9v!", "Zm9v\u{0}",
        ])
    func strictURL(_ text: String) {
        #expect(Base64.urlDecode(text) == nil)
        #expect(Base64.urlDecode(Array(text.utf8)) == nil)
    }

    @Test("every single-byte value survives both encodings")
    func allBytes() {
        for value in 0...255 {
            let bytes = [UInt8(value)]
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
            #expect(Base64.decodedCount(Base64.encode(bytes)) == 1)
            #expect(Base64.urlDecode(Base64.urlEncode(bytes)) == bytes)
        }
        let all = (0...255).map { UInt8($0) }
        #expect(Base64.decode(Base64.encode(all)) == all)
    }

    /// `decodedCount` makes `decode`'s decisions without decoding: the two agree on every
    /// length of valid text and on every one-character change of it to any ASCII byte or a
    /// non-ASCII one (the longer texts go through its eight-at-a-time path).
    @Test("decodedCount agrees with decode", arguments: Array(0..<24) + [40, 61])
    func decodedCountAgrees(_ length: Int) {
        let bytes = (0..<length).map { _ in UInt8.random(in: 0...255) }
        let text = Base64.encode(bytes)
        #expect(Base64.decodedCount(text) == length)
        let alphabet = Array(0...0x80).map { UInt8($0) } + [0xC3, 0xFF]
        var utf8 = Array(text.utf8)
        for index in utf8.indices {
            let original = utf8[index]
            for replacement in alphabet where replacement != original {
                utf8[index] = replacement
                let changed = String(decoding: utf8, as: UTF8.self)
                #expect(Base64.decodedCount(changed) == Base64.decode(changed)?.count, "\(changed)")
            }
            utf8[index] = original
        }
    }

    @Test("a substring is decoded without copying its base")
    func substring() {
        let text = "xxZm9vYmFyxx"
        let inner = text.dropFirst(2).dropLast(2)
        #expect(Base64.decode(inner) == Array("foobar".utf8))
        #expect(Base64.urlDecode(inner) == Array("foobar".utf8))
    }
}
