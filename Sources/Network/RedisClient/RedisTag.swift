/// A request's tag as it travels: its sequence number in exactly 16 lowercase hex digits, so that
/// every call of one prepared command has the same length (see ``RedisScriptCall``).
enum RedisTag {
    static let length = 16

    /// Writes `tag` into the 16 bytes at `target`.
    static func write(_ tag: UInt64, to target: UnsafeMutableRawBufferPointer) {
        let digits: StaticString = "0123456789abcdef"
        digits.withUTF8Buffer { hex in
            for index in 0..<length {
                target[index] = hex[Int(tag >> UInt64((length - 1 - index) * 4) & 0xF)]
            }
        }
    }

    static func bytes(_ tag: UInt64) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: length) { buffer, count in
            write(tag, to: UnsafeMutableRawBufferPointer(buffer))
            count = length
        }
    }

    /// The tag written by ``write(_:to:)``; nil for anything else (another length, a capital or a non-hex byte).
    static func parse(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
        guard bytes.count == length else { return nil }
        var value: UInt64 = 0
        for byte in bytes {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }
}
