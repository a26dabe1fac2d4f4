/// Test helper: bytes from a hex string (whitespace ignored); traps on bad input.
func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.filter { !$0.isWhitespace }.utf8)
    precondition(digits.count % 2 == 0, "odd hex length")
    return stride(from: 0, to: digits.count, by: 2).map { i in
        UInt8(String(decoding: digits[i..<i + 2], as: UTF8.self), radix: 16)!
    }
}

/// Test helper: lowercase hex of bytes.
func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
}
