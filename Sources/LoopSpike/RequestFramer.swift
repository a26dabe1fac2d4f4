/// Finds where HTTP/1.1 requests end in a keep-alive byte stream (head, then `Content-Length` bytes), just
/// enough to answer each request once: the spike measures the loop, not a parser. Both servers use it.
struct RequestFramer {
    /// Bytes of a request not complete yet (empty in the common case of a request read whole).
    private var pending: [UInt8] = []
    /// Body bytes still to skip for the request whose head was read.
    private var bodyLeft = 0

    /// Feeds bytes; returns how many requests they completed.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Int {
        if pending.isEmpty {
            return scan(bytes)
        }
        pending.append(contentsOf: bytes)
        let joined = pending
        pending.removeAll(keepingCapacity: true)
        return joined.withUnsafeBytes { scan($0) }
    }

    private mutating func scan(_ bytes: UnsafeRawBufferPointer) -> Int {
        var completed = 0
        var index = 0
        while index < bytes.count {
            if bodyLeft > 0 {
                let skipped = min(bodyLeft, bytes.count - index)
                bodyLeft -= skipped
                index += skipped
                if bodyLeft == 0 { completed += 1 }
                continue
            }
            guard let headEnd = Self.endOfHead(bytes, from: index) else {
                pending.append(contentsOf: bytes[index...])
                return completed
            }
            let length = Self.contentLength(bytes, from: index, to: headEnd)
            index = headEnd
            if length == 0 {
                completed += 1
            } else {
                bodyLeft = length
            }
        }
        return completed
    }

    private static func endOfHead(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        var index = start
        while index + 3 < bytes.count {
            if bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
                return index + 4
            }
            index += 1
        }
        return nil
    }

    private static let name = Array("content-length:".utf8)

    private static func contentLength(_ bytes: UnsafeRawBufferPointer, from start: Int, to end: Int) -> Int {
        var line = start
        while line < end {
            var matched = true
            for (offset, byte) in name.enumerated() where line + offset >= end || bytes[line + offset] | 0x20 != byte {
                matched = false
                break
            }
            if matched {
                var value = 0
                var index = line + name.count
                while index < end && bytes[index] == 32 { index += 1 }
                while index < end, bytes[index] >= 48, bytes[index] <= 57 {
                    value = value * 10 + Int(bytes[index] - 48)
                    index += 1
                }
                return value
            }
            while line < end && bytes[line] != 10 { line += 1 }
            line += 1
        }
        return 0
    }
}

/// The one answer both servers give.
let answer = Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}".utf8)
