/// Finds complete HTTP/1.1 answers in the bytes a connection has read. Deliberately small (this is a test
/// tool): a status line, headers scanned for `Content-Length`, and that many body bytes. The relay always
/// answers with a length.
enum HTTPResponseFraming {
    /// One complete answer at the start of a buffer.
    struct Response: Equatable {
        var status: Int
        /// Where its body lies in the buffer.
        var body: Range<Int>
        /// How many bytes the whole answer takes.
        var length: Int
        /// `Retry-After` in whole seconds (the relay's form), nil when absent.
        var retryAfter: Int? = nil
    }

    /// The complete answer at the start of `bytes`, or nil while it is incomplete.
    static func response(at bytes: UnsafeRawBufferPointer) -> Response? {
        guard let headEnd = endOfHead(in: bytes) else { return nil }
        // "HTTP/1.1 200 ..."
        guard headEnd >= 12 else { return Response(status: 0, body: headEnd + 4..<headEnd + 4, length: headEnd + 4) }
        var status = 0
        for index in 9..<12 {
            status = status * 10 + Int(bytes[index] &- 48)
        }
        var contentLength = 0
        var retryAfter: Int?
        var lineStart = 0
        while lineStart < headEnd {
            var lineEnd = lineStart
            while lineEnd < headEnd && bytes[lineEnd] != 13 { lineEnd += 1 }
            if let value = number(named: contentLengthName, in: bytes, line: lineStart..<lineEnd) {
                contentLength = value
            } else if let value = number(named: retryAfterName, in: bytes, line: lineStart..<lineEnd) {
                retryAfter = value
            }
            lineStart = lineEnd + 2
        }
        let bodyStart = headEnd + 4
        guard bytes.count - bodyStart >= contentLength else { return nil }
        return Response(
            status: status, body: bodyStart..<bodyStart + contentLength, length: bodyStart + contentLength,
            retryAfter: retryAfter)
    }

    /// The digits of a header line named `name` (lower case, with its colon), or nil if the line has another name.
    private static func number(named name: [UInt8], in bytes: UnsafeRawBufferPointer, line: Range<Int>) -> Int? {
        guard line.count > name.count else { return nil }
        for (offset, expected) in name.enumerated() where bytes[line.lowerBound + offset] | 0x20 != expected {
            return nil
        }
        var value = 0
        for byte in bytes[(line.lowerBound + name.count)..<line.upperBound] where byte >= 48 && byte <= 57 {
            value = value * 10 + Int(byte - 48)
        }
        return value
    }

    /// Lower case, compared with each byte `| 0x20` (which leaves `-` and `:` as they are).
    private static let contentLengthName: [UInt8] = Array("content-length:".utf8)
    private static let retryAfterName: [UInt8] = Array("retry-after:".utf8)

    /// The offset of the first CR LF CR LF.
    private static func endOfHead(in bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var index = 0
        let last = bytes.count - 4
        while index <= last {
            if bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
                return index
            }
            index += 1
        }
        return nil
    }
}
