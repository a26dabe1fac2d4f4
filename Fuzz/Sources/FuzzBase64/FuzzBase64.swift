import FuzzSupport
import RelayCrypto

/// Strict Base64 and base64url decoding (RelayCrypto): never crash; whatever decodes encodes back
/// to exactly the same text (one canonical form per byte string); the text and byte overloads
/// and a Substring at a non-zero offset agree; and encoding any bytes decodes back to them.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBase64(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    Base64Target.check(input, decode: Base64.decode, decodeText: Base64.decode, encode: Base64.encode, padded: true)
    Base64Target.check(
        input, decode: Base64.urlDecode, decodeText: Base64.urlDecode, encode: Base64.urlEncode, padded: false)
    return 0
}

@_cdecl("FuzzBase64_main")
public func fuzzBase64Main(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv, fuzzBase64)
}

enum Base64Target {
    static func check(
        _ input: [UInt8], decode: ([UInt8]) -> [UInt8]?, decodeText: (Substring) -> [UInt8]?,
        encode: ([UInt8]) -> String, padded: Bool
    ) {
        let decoded = decode(input)
        if let decoded {
            invariant(Array(encode(decoded).utf8) == input, "decoded text does not re-encode to itself")
        }
        let text = String(decoding: input, as: UTF8.self)
        if Array(text.utf8) == input {
            invariant(decodeText(text[...]) == decoded, "text and bytes overloads disagree")
            invariant(decodeText(offsetSubstring(text)) == decoded, "a Substring at an offset decodes differently")
        }

        // The other direction: any bytes encode to text that decodes back to them.
        let encoded = encode(input)
        let groups = input.count / 3
        let rest = input.count % 3
        let expectedLength = groups * 4 + (rest == 0 ? 0 : (padded ? 4 : rest + 1))
        invariant(encoded.utf8.count == expectedLength, "encoded length")
        invariant(decode(Array(encoded.utf8)) == input, "encode then decode is not the identity")
    }
}
