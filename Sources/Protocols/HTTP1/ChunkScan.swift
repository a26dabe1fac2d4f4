/// Reads a chunked body's framing (RFC 9112, 7.1) a byte at a time: the size lines, the data between them, the CRLF
/// after each chunk's data, and the trailer section after the last chunk (scanned by a ``LineScan`` to the head's
/// rules and limits, its fields dropped: nothing reads them). The request parser and the response reader share it,
/// so that both hold chunks to the same rules.
///
/// Every decision is taken at one byte's position, so the outcome does not depend on where reads ended.
struct ChunkScan: Sendable {
    enum Outcome: Sendable {
        case needMoreBytes
        /// These bytes (offsets into the buffer scanned) are chunk data; call again for the rest.
        case data(Range<Int>)
        /// The last chunk and the trailer section after it were read: the body is complete.
        case complete
        /// A chunk's size is over `room`: the body would pass its limit.
        case tooLarge
        case failed(HTTP1ParseError.Code, String)
    }

    enum Step: Sendable {
        /// Chunk size digits so far, and the length of the size line so far.
        case size(value: UInt64, digits: Int, lineBytes: Int)
        case sizeExtension(value: UInt64, lineBytes: Int)
        case sizeLF(value: UInt64)
        case data(remaining: Int)
        case dataCR
        case dataLF
        /// Scanning the trailer section, from the buffer's position (`scan` is how far).
        case trailers(LineScan)
        case done
    }

    /// The longest chunk size line, extensions included: extensions are ignored, but bounded.
    static let maxLineBytes = 1024

    private(set) var step = Step.size(value: 0, digits: 0, lineBytes: 0)

    /// Scans `bytes` (the buffer's) from its position on, advancing it past what was read. `room` is how many more
    /// data bytes the body may take: a chunk whose size is over it is refused from its size line, before any of its
    /// data. The trailer section is held to `limits`.
    mutating func scan(
        _ bytes: UnsafeBufferPointer<UInt8>, in buffer: inout ScanBuffer, room: Int, limits: HTTP1RequestParser.Limits
    ) -> Outcome {
        let end = bytes.count
        while true {
            switch step {
            case .size(let value, let digits, let lineBytes):
                guard buffer.position < end else { return .needMoreBytes }
                let byte = bytes[buffer.position]
                guard lineBytes < Self.maxLineBytes else {
                    return .failed(.invalidChunkSize, "chunk size line over its limit")
                }
                buffer.position += 1
                if let digit = ASCII.hexValue(byte) {
                    // At most 16 digits, and never past 2^63: refused, not wrapped, so that no reader may take a
                    // size for a smaller one.
                    guard digits < 16, value <= (UInt64(Int.max) >> 4) else {
                        return .failed(.invalidChunkSize, "chunk size over 16 hex digits or past 2^63")
                    }
                    step = .size(value: value << 4 | UInt64(digit), digits: digits + 1, lineBytes: lineBytes + 1)
                    continue
                }
                guard digits > 0 else { return .failed(.invalidChunkSize, "chunk size without hex digits") }
                switch byte {
                case ASCII.cr: step = .sizeLF(value: value)
                case ASCII.semicolon: step = .sizeExtension(value: value, lineBytes: lineBytes + 1)
                case ASCII.lf: return .failed(.invalidLineEnding, "chunk size line ended by a bare LF")
                default:
                    // White space before an extension (BWS in RFC 9112) is refused too: h11 and other readers
                    // refuse it, and a message two readers frame differently is how requests are smuggled.
                    return .failed(.invalidChunkSize, "chunk size not hex digits")
                }
            case .sizeExtension(let value, var lineBytes):
                // Ignored, but held to a field value's bytes and to the line's limit.
                while buffer.position < end && ASCII.isFieldValue(bytes[buffer.position])
                    && lineBytes < Self.maxLineBytes
                {
                    buffer.position += 1
                    lineBytes += 1
                }
                guard buffer.position < end else {
                    step = .sizeExtension(value: value, lineBytes: lineBytes)
                    return .needMoreBytes
                }
                guard lineBytes < Self.maxLineBytes else {
                    return .failed(.invalidChunkSize, "chunk size line over its limit")
                }
                let byte = bytes[buffer.position]
                buffer.position += 1
                switch byte {
                case ASCII.cr: step = .sizeLF(value: value)
                case ASCII.lf: return .failed(.invalidLineEnding, "chunk size line ended by a bare LF")
                default: return .failed(.invalidChunkSize, "a control byte in a chunk extension")
                }
            case .sizeLF(let value):
                guard buffer.position < end else { return .needMoreBytes }
                guard bytes[buffer.position] == ASCII.lf else {
                    return .failed(.invalidLineEnding, "a CR not followed by LF after a chunk size")
                }
                buffer.position += 1
                if value == 0 {
                    buffer.scan = buffer.position
                    step = .trailers(LineScan(trailers: ()))
                    continue
                }
                guard value <= UInt64(max(0, room)) else { return .tooLarge }
                step = .data(remaining: Int(value))
            case .data(let remaining):
                let count = min(remaining, end - buffer.position)
                guard count > 0 else { return .needMoreBytes }
                step = count < remaining ? .data(remaining: remaining - count) : .dataCR
                buffer.position += count
                return .data((buffer.position - count)..<buffer.position)
            case .dataCR:
                guard buffer.position < end else { return .needMoreBytes }
                guard bytes[buffer.position] == ASCII.cr else {
                    return .failed(.invalidChunkData, "chunk data not followed by CRLF")
                }
                buffer.position += 1
                step = .dataLF
            case .dataLF:
                guard buffer.position < end else { return .needMoreBytes }
                guard bytes[buffer.position] == ASCII.lf else {
                    return .failed(.invalidChunkData, "chunk data not followed by CRLF")
                }
                buffer.position += 1
                step = .size(value: 0, digits: 0, lineBytes: 0)
            case .trailers(var lines):
                var index = buffer.scan
                let outcome = lines.scan(bytes, from: buffer.position, at: &index, limits: limits, isTrailer: true)
                buffer.scan = index
                step = .trailers(lines)
                switch outcome {
                case .needMoreBytes: return .needMoreBytes
                case .failed(let code, let reason): return .failed(code, reason)
                case .complete:
                    buffer.position = buffer.scan
                    step = .done
                    return .complete
                }
            case .done:
                return .complete
            }
        }
    }
}
