/// Scans a head (a request line or a status line, then field lines) or a trailer section a byte at a time,
/// remembering where each part lies as offsets from the section's first byte; the strings are made once the section
/// is complete. Requests and responses are held to the same field rules.
///
/// Every decision is taken at one byte's position, so the outcome for a stream of bytes does not depend on where
/// its reads ended.
struct LineScan: Sendable {
    enum Step: Sendable {
        case method, target, version, startLineLF, fieldStart, fieldName, fieldValue, fieldLF, finalLF
        /// A status line: `HTTP/1.x`, SP, three digits, then SP and a reason (or the CR at once).
        case statusVersion, statusCode, reason
    }

    enum Outcome: Sendable {
        case needMoreBytes
        case complete
        case failed(HTTP1ParseError.Code, String)
    }

    /// Offsets of a field line's name and trimmed value, from the head's first byte.
    struct FieldRange: Sendable {
        var nameStart: Int
        var nameEnd: Int
        var valueStart: Int
        var valueEnd: Int
    }

    var step: Step
    let isTrailer: Bool
    var methodEnd = 0
    var targetStart = 0
    var targetEnd = 0
    var versionStart = 0
    var minorVersion: UInt8 = 1
    var status = 0
    var reasonStart = 0
    var reasonEnd = 0
    var fields: [FieldRange] = []
    var fieldLines = 0
    var current = FieldRange(nameStart: 0, nameEnd: 0, valueStart: 0, valueEnd: 0)
    var valueStarted = false

    /// A scan of a head, from its request line.
    init() {
        step = .method
        isTrailer = false
    }

    /// A scan of a response's head, from its status line.
    init(statusLine: Void) {
        step = .statusVersion
        isTrailer = false
    }

    /// A scan of a trailer section, from its first field line; its fields are not recorded.
    init(trailers: Void) {
        step = .fieldStart
        isTrailer = true
    }

    /// Scans from `index` on; `start` is the section's first byte. Stops at the section's end (`index` just past
    /// its final LF), at the first broken rule, or when the bytes run out.
    mutating func scan(
        _ bytes: UnsafeBufferPointer<UInt8>, from start: Int, at index: inout Int, limits: HTTP1RequestParser.Limits,
        isTrailer: Bool
    ) -> Outcome {
        let sizeEnd = start + limits.maxHeadBytes
        let end = min(bytes.count, sizeEnd)
        var i = index
        defer { index = i }
        // The target may run past the head's limit, up to its own (see `.target`).
        while i < end || (step == .target && i < min(bytes.count, start + targetStart + limits.maxTargetBytes + 1)) {
            let byte = bytes[i]
            switch step {
            case .method:
                if ASCII.isToken(byte) {
                    i += 1
                    continue
                }
                if i == start {
                    return .failed(.invalidRequestLine, "the request line does not start with a method")
                }
                guard byte == ASCII.space else {
                    return byte == ASCII.cr || byte == ASCII.lf
                        ? .failed(.invalidRequestLine, "a request line without a target")
                        : .failed(.invalidMethod, "the method is not a token")
                }
                methodEnd = i - start
                targetStart = methodEnd + 1
                step = .target
                i += 1
            case .target:
                // A target over its limit is 414 even where the head's limit comes first (a long target makes a
                // long head too): the target is scanned up to its own limit, then the head's limit is checked.
                let targetScanEnd = min(bytes.count, max(end, start + targetStart + limits.maxTargetBytes + 1))
                while i < targetScanEnd && ASCII.isVisible(bytes[i]) {
                    if i - start - targetStart >= limits.maxTargetBytes {
                        return .failed(.targetTooLong, "the target is over its limit")
                    }
                    i += 1
                }
                guard i < end else { break }
                let next = bytes[i]
                guard next == ASCII.space else {
                    return next == ASCII.cr || next == ASCII.lf
                        ? .failed(.invalidRequestLine, "a request line without a version")
                        : .failed(.invalidTarget, "a byte in the target that is not visible ASCII")
                }
                guard i - start > targetStart else {
                    return .failed(.invalidRequestLine, "two spaces after the method")
                }
                targetEnd = i - start
                versionStart = targetEnd + 1
                step = .version
                i += 1
            case .version:
                if byte == ASCII.cr {
                    switch Self.version(UnsafeBufferPointer(rebasing: bytes[(start + versionStart)..<i])) {
                    case .failure(let failure): return .failed(failure.code, failure.reason)
                    case .success(let minor): minorVersion = minor
                    }
                    step = .startLineLF
                } else if byte == ASCII.lf {
                    return .failed(.invalidLineEnding, "the request line ends with a bare LF")
                } else if i - start - versionStart >= 8 {
                    return .failed(.invalidRequestLine, "the version is not HTTP/x.y")
                }
                i += 1
            case .statusVersion:
                // `HTTP/1.0` or `HTTP/1.1` and a space, byte by byte: anything else (another protocol's bytes, a
                // lowercase name, HTTP/2) is refused on its first wrong byte rather than when the head's time runs
                // out.
                let offset = i - start
                let expected: Bool
                switch offset {
                case 0..<7: expected = byte == Self.httpSlashOneDot[offset]
                case 7: expected = byte == UInt8(ascii: "0") || byte == UInt8(ascii: "1")
                default: expected = byte == ASCII.space
                }
                guard expected else {
                    return .failed(.invalidRequestLine, "the status line does not start with HTTP/1.0 or HTTP/1.1")
                }
                if offset == 7 { minorVersion = byte - UInt8(ascii: "0") }
                if offset == 8 { step = .statusCode }
                i += 1
            case .statusCode:
                let offset = i - start
                if offset < 12 {
                    guard let value = Self.digit(byte) else {
                        return .failed(.invalidRequestLine, "the status is not three digits")
                    }
                    status = status * 10 + Int(value)
                    i += 1
                    continue
                }
                guard (100...599).contains(status) else {
                    return .failed(.invalidRequestLine, "a status outside 100 to 599")
                }
                reasonStart = byte == ASCII.space ? 13 : 12
                reasonEnd = reasonStart
                switch byte {
                case ASCII.space: step = .reason
                // Some servers send no reason and no space before the line's end.
                case ASCII.cr: step = .startLineLF
                default: return .failed(.invalidRequestLine, "the status is not three digits followed by a space")
                }
                i += 1
            case .reason:
                // Printable ASCII and HTAB only: a caller may print the reason (a proxy's refusal is logged).
                while i < end && (bytes[i] == ASCII.tab || (bytes[i] >= ASCII.space && bytes[i] < 0x7F)) {
                    i += 1
                }
                guard i < end else { break }
                switch bytes[i] {
                case ASCII.cr:
                    reasonEnd = i - start
                    step = .startLineLF
                    i += 1
                case ASCII.lf: return .failed(.invalidLineEnding, "the status line ends with a bare LF")
                default: return .failed(.invalidRequestLine, "a reason phrase byte that is not printable ASCII")
                }
            case .startLineLF, .fieldLF:
                guard byte == ASCII.lf else { return .failed(.invalidLineEnding, "a CR not followed by LF") }
                step = .fieldStart
                i += 1
            case .fieldStart:
                if ASCII.isToken(byte) {
                    fieldLines += 1
                    guard fieldLines <= limits.maxFieldLines else {
                        return .failed(.headTooLarge, "more field lines than the limit")
                    }
                    current.nameStart = i - start
                    step = .fieldName
                    i += 1
                    continue
                }
                switch byte {
                case ASCII.cr: step = .finalLF
                case ASCII.space, ASCII.tab: return .failed(.obsoleteLineFolding, "a line starting with white space")
                case ASCII.lf: return .failed(.invalidLineEnding, "a bare LF")
                default: return .failed(.invalidFieldName, "a field name that is not a token")
                }
                i += 1
            case .fieldName:
                while i < end && ASCII.isToken(bytes[i]) {
                    i += 1
                }
                guard i < end else { break }
                guard bytes[i] == ASCII.colon else {
                    return .failed(.invalidFieldName, "a field name not followed at once by a colon")
                }
                current.nameEnd = i - start
                current.valueStart = current.nameEnd + 1
                current.valueEnd = current.valueStart
                valueStarted = false
                step = .fieldValue
                i += 1
            case .fieldValue:
                while i < end {
                    let next = bytes[i]
                    guard ASCII.isFieldValue(next) else { break }
                    if next != ASCII.space && next != ASCII.tab {
                        if !valueStarted {
                            valueStarted = true
                            current.valueStart = i - start
                        }
                        current.valueEnd = i + 1 - start
                    }
                    i += 1
                }
                guard i < end else { break }
                switch bytes[i] {
                case ASCII.cr:
                    if !valueStarted { current.valueEnd = current.valueStart }
                    if !isTrailer {
                        // Room for a usual head's fields at once, rather than growing one, two, four, eight.
                        if fields.capacity == 0 { fields.reserveCapacity(8) }
                        fields.append(current)
                    }
                    step = .fieldLF
                    i += 1
                case ASCII.lf: return .failed(.invalidLineEnding, "a field line ends with a bare LF")
                default: return .failed(.invalidFieldValue, "a control byte in a field value")
                }
            case .finalLF:
                guard byte == ASCII.lf else { return .failed(.invalidLineEnding, "a CR not followed by LF") }
                i += 1
                return .complete
            }
        }
        if i >= sizeEnd && bytes.count > sizeEnd {
            // A target still within its own limit when the bytes ran out may yet prove over it (414, above).
            if case .target = step, i == bytes.count, i - start - targetStart <= limits.maxTargetBytes {
                return .needMoreBytes
            }
            return .failed(.headTooLarge, isTrailer ? "trailers over the head's limit" : "the head is over its limit")
        }
        return .needMoreBytes
    }

    /// The minor version of `HTTP/1.x`: 0 or 1; another well-formed version is 505, anything else 400.
    static func version(_ text: UnsafeBufferPointer<UInt8>) -> Result<UInt8, HTTP1ParseError> {
        guard text.count == 8, text[0] == UInt8(ascii: "H"), text[1] == UInt8(ascii: "T"), text[2] == UInt8(ascii: "T"),
            text[3] == UInt8(ascii: "P"), text[4] == ASCII.slash, text[6] == UInt8(ascii: "."),
            let major = digit(text[5]), let minor = digit(text[7])
        else {
            return .failure(HTTP1ParseError(.invalidRequestLine, "the version is not HTTP/x.y"))
        }
        guard major == 1 && minor <= 1 else {
            return .failure(HTTP1ParseError(.versionNotSupported, "a version other than HTTP/1.0 and HTTP/1.1"))
        }
        return .success(minor)
    }

    private static let httpSlashOneDot: [UInt8] = Array("HTTP/1.".utf8)

    private static func digit(_ byte: UInt8) -> UInt8? {
        byte >= 0x30 && byte <= 0x39 ? byte - 0x30 : nil
    }
}
