/// Reads a chunked body's framing (RFC 9112, 7.1) a byte at a time, up to its last chunk: the size lines, the data
/// between them and the CRLF after each chunk's data. The request parser and the response reader share it, so that
/// both hold chunks to the same rules; each reads the trailer section after the last chunk with its ``LineScan``.
///
/// Every decision is taken at one byte's position, so the outcome does not depend on where reads ended.
struct ChunkScan: Sendable {
    enum Outcome: Sendable {
        case needMoreBytes
        /// These bytes (offsets into the buffer scanned) are chunk data; call again for the rest.
        case data(Range<Int>)
        /// The last chunk's size line (`0`) was read: the trailer section starts at the position.
        case lastChunk
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
        case done
    }

    /// The longest chunk size line, extensions included: extensions are ignored, but bounded.
    static let maxLineBytes = 1024

    private(set) var step = Step.size(value: 0, digits: 0, lineBytes: 0)

    /// Scans from `position` on, advancing it past what was read. `room` is how many more data bytes the body may
    /// take: a chunk whose size is over it is refused from its size line, before any of its data.
    mutating func scan(_ bytes: UnsafeBufferPointer<UInt8>, at position: inout Int, room: Int) -> Outcome {
        let end = bytes.count
        while true {
            switch step {
            case .size(let value, let digits, let lineBytes):
                guard position < end else { return .needMoreBytes }
                let byte = bytes[position]
                guard lineBytes < Self.maxLineBytes else {
                    return .failed(.invalidChunkSize, "chunk size line over its limit")
                }
                position += 1
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
                while position < end && ASCII.isFieldValue(bytes[position]) && lineBytes < Self.maxLineBytes {
                    position += 1
                    lineBytes += 1
                }
                guard position < end else {
                    step = .sizeExtension(value: value, lineBytes: lineBytes)
                    return .needMoreBytes
                }
                guard lineBytes < Self.maxLineBytes else {
                    return .failed(.invalidChunkSize, "chunk size line over its limit")
                }
                let byte = bytes[position]
                position += 1
                switch byte {
                case ASCII.cr: step = .sizeLF(value: value)
                case ASCII.lf: return .failed(.invalidLineEnding, "chunk size line ended by a bare LF")
                default: return .failed(.invalidChunkSize, "a control byte in a chunk extension")
                }
            case .sizeLF(let value):
                guard position < end else { return .needMoreBytes }
                guard bytes[position] == ASCII.lf else {
                    return .failed(.invalidLineEnding, "a CR not followed by LF after a chunk size")
                }
                position += 1
                if value == 0 {
                    step = .done
                    return .lastChunk
                }
                guard value <= UInt64(max(0, room)) else { return .tooLarge }
                step = .data(remaining: Int(value))
            case .data(let remaining):
                let count = min(remaining, end - position)
                guard count > 0 else { return .needMoreBytes }
                step = count < remaining ? .data(remaining: remaining - count) : .dataCR
                position += count
                return .data((position - count)..<position)
            case .dataCR:
                guard position < end else { return .needMoreBytes }
                guard bytes[position] == ASCII.cr else {
                    return .failed(.invalidChunkData, "chunk data not followed by CRLF")
                }
                position += 1
                step = .dataLF
            case .dataLF:
                guard position < end else { return .needMoreBytes }
                guard bytes[position] == ASCII.lf else {
                    return .failed(.invalidChunkData, "chunk data not followed by CRLF")
                }
                position += 1
                step = .size(value: 0, digits: 0, lineBytes: 0)
            case .done:
                return .lastChunk
            }
        }
    }
}
