import ErrorCodes
/// A head refused once complete, with the head as read (a handler may count the refusal against its route).
struct HeadRefusal: CodedError {
    let code: HTTP1ParseError.Code
    let reason: String
    let head: HTTP1RequestHead
}

extension LineScan {
    typealias Bytes = UnsafeBufferPointer<UInt8>

    /// The head of a complete section, with its framing checked (docs/DESIGN.md, "The HTTP front"): one valid `Host` in
    /// HTTP/1.1, `Content-Length` digits given once, `Transfer-Encoding` only as one `chunked` in HTTP/1.1.
    func makeHead(_ bytes: Bytes, start: Int) -> Result<HTTP1RequestHead, HeadRefusal> {
        let method = Self.text(bytes, start, 0, methodEnd)
        let target = Self.slice(bytes, start + targetStart, start + targetEnd)
        var head = HTTP1RequestHead(
            method: method, target: String(decoding: target, as: UTF8.self), path: "",
            version: HTTP1Version(minor: minorVersion), keepAlive: false)
        var headerFields: [HTTP1Headers.Field] = []
        headerFields.reserveCapacity(fields.count)
        for field in fields {
            headerFields.append(
                HTTP1Headers.Field(
                    name: Self.text(bytes, start, field.nameStart, field.nameEnd),
                    value: Self.text(bytes, start, field.valueStart, field.valueEnd)))
        }
        head.headers = HTTP1Headers(headerFields)
        func refuse(_ code: HTTP1ParseError.Code, _ reason: String) -> Result<HTTP1RequestHead, HeadRefusal> {
            .failure(HeadRefusal(code: code, reason: reason, head: head))
        }

        switch Self.path(of: target) {
        case .invalid: return refuse(.invalidTarget, "the target is neither origin form nor http(s) absolute form")
        case .nul: return refuse(.invalidTarget, "the path holds %00")
        case .path(let path): head.path = path
        }

        var hosts = 0
        var lengths = 0
        var encodings = 0
        var connectionClose = false
        var connectionKeepAlive = false
        for field in fields {
            let name = Self.slice(bytes, start + field.nameStart, start + field.nameEnd)
            let value = Self.slice(bytes, start + field.valueStart, start + field.valueEnd)
            if Self.matches(name, "host") {
                hosts += 1
                guard hosts == 1 else { return refuse(.invalidHost, "Host given more than once") }
                guard Self.isValidHost(value) else { return refuse(.invalidHost, "a Host value that is not a host") }
            } else if Self.matches(name, "content-length") {
                lengths += 1
                // Even equal values are refused: a reader that took a list or a second line differently is
                // exactly the disagreement that smuggles requests.
                guard lengths == 1 else { return refuse(.invalidContentLength, "Content-Length given more than once") }
                guard let length = Self.decimal(value) else {
                    return refuse(.invalidContentLength, "Content-Length that is not ASCII digits")
                }
                head.contentLength = length
            } else if Self.matches(name, "transfer-encoding") {
                encodings += 1
                guard encodings == 1 else {
                    return refuse(.invalidTransferEncoding, "Transfer-Encoding given more than once")
                }
                switch Self.transferCoding(value) {
                case .chunked: head.isChunked = true
                case .other: return refuse(.invalidTransferEncoding, "a Transfer-Encoding other than one chunked")
                case .unknown: return refuse(.unsupportedTransferCoding, "a transfer coding the relay does not know")
                }
            } else if Self.matches(name, "connection") {
                Self.forEachElement(value) { element in
                    if Self.matches(element, "close") { connectionClose = true }
                    if Self.matches(element, "keep-alive") { connectionKeepAlive = true }
                }
            } else if Self.matches(name, "expect") {
                head.expectsContinue = Self.matches(value, "100-continue")
            }
        }
        if head.version == .http11 && hosts == 0 {
            return refuse(.invalidHost, "an HTTP/1.1 request without Host")
        }
        if head.isChunked || encodings > 0 {
            if head.contentLength != nil {
                return refuse(.invalidTransferEncoding, "Transfer-Encoding beside Content-Length")
            }
            if head.version == .http10 {
                return refuse(.invalidTransferEncoding, "Transfer-Encoding in an HTTP/1.0 request")
            }
        }
        head.expectsContinue = head.expectsContinue && head.version == .http11
        head.keepAlive = head.version == .http11 ? !connectionClose : connectionKeepAlive && !connectionClose
        return .success(head)
    }

    /// What was read of a head refused before its end: the method and target once the request line had them (for
    /// a target over its limit, its first bytes), and the field lines complete so far.
    func partialHead(_ bytes: Bytes, start: Int, upTo scanned: Int, limits: HTTP1RequestParser.Limits)
        -> HTTP1RequestHead
    {
        var head = HTTP1RequestHead(method: "", target: "", path: "", keepAlive: false)
        guard !isTrailer else { return head }
        if methodEnd > 0 {
            head.method = Self.text(bytes, start, 0, methodEnd)
            let targetLast: Int
            switch step {
            case .method: return head
            case .target: targetLast = min(scanned - start, targetStart + limits.maxTargetBytes)
            default: targetLast = targetEnd
            }
            let target = Self.slice(bytes, start + targetStart, start + targetLast)
            head.target = String(decoding: target, as: UTF8.self)
            if case .path(let path) = Self.path(of: target) { head.path = path }
        }
        if step != .method && step != .target && step != .version {
            head.version = HTTP1Version(minor: minorVersion)
        }
        head.headers = HTTP1Headers(
            fields.map {
                HTTP1Headers.Field(
                    name: Self.text(bytes, start, $0.nameStart, $0.nameEnd),
                    value: Self.text(bytes, start, $0.valueStart, $0.valueEnd))
            })
        return head
    }

    // MARK: - Pieces

    static func slice(_ bytes: Bytes, _ from: Int, _ to: Int) -> Bytes {
        Bytes(rebasing: bytes[from..<to])
    }

    static func text(_ bytes: Bytes, _ start: Int, _ from: Int, _ to: Int) -> String {
        String(decoding: slice(bytes, start + from, start + to), as: UTF8.self)
    }

    /// Whether `bytes` spell `lowercase` in any ASCII case.
    static func matches(_ bytes: Bytes, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        let expected = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        for index in 0..<bytes.count where ASCII.lowercased(bytes[index]) != expected[index] {
            return false
        }
        return true
    }

    /// Each element of a comma-separated list, trimmed of spaces and tabs; empty elements are skipped
    /// (RFC 9110, 5.6.1).
    static func forEachElement(_ value: Bytes, _ body: (Bytes) -> Void) {
        var from = 0
        while from <= value.count {
            var to = from
            while to < value.count && value[to] != UInt8(ascii: ",") { to += 1 }
            var first = from
            var last = to
            while first < last && (value[first] == ASCII.space || value[first] == ASCII.tab) { first += 1 }
            while last > first && (value[last - 1] == ASCII.space || value[last - 1] == ASCII.tab) { last -= 1 }
            if first < last { body(slice(value, first, last)) }
            from = to + 1
        }
    }

    /// A `Content-Length` value: one or more ASCII digits, nothing else; past `Int.max` it saturates (over any
    /// limit, so 413 however many digits).
    static func decimal(_ value: Bytes) -> Int? {
        guard !value.isEmpty else { return nil }
        var result = 0
        var saturated = false
        for byte in value {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            if !saturated {
                let (times, overflowTimes) = result.multipliedReportingOverflow(by: 10)
                let (sum, overflowSum) = times.addingReportingOverflow(Int(byte - 0x30))
                if overflowTimes || overflowSum {
                    saturated = true
                    result = Int.max
                } else {
                    result = sum
                }
            }
        }
        return result
    }

    enum TransferCoding {
        case chunked, other, unknown
    }

    /// A `Transfer-Encoding` value: exactly one `chunked`; a list of codings the relay knows but does not take
    /// (`gzip, chunked`, `chunked, chunked`, `identity`): other; any coding it does not know: unknown (501).
    static func transferCoding(_ value: Bytes) -> TransferCoding {
        var elements = 0
        var chunked = 0
        var unknown = false
        forEachElement(value) { element in
            elements += 1
            // Parameters (`;q=...`) are not part of a coding's name.
            var nameEnd = 0
            while nameEnd < element.count && ASCII.isToken(element[nameEnd]) { nameEnd += 1 }
            let name = slice(element, 0, nameEnd)
            if nameEnd == element.count && matches(name, "chunked") {
                chunked += 1
            } else if !(matches(name, "gzip") || matches(name, "x-gzip") || matches(name, "deflate")
                || matches(name, "compress") || matches(name, "x-compress") || matches(name, "identity")
                || matches(name, "chunked"))
            {
                unknown = true
            }
        }
        if unknown { return .unknown }
        return elements == 1 && chunked == 1 ? .chunked : .other
    }

    /// A `Host` value or an absolute target's authority: `host [":" port]`, the host a registered name or IPv4
    /// address (RFC 3986 reg-name bytes) or a bracketed IP literal; no user information.
    static func isValidHost(_ value: Bytes) -> Bool {
        guard let first = value.first else { return false }
        var index = 0
        if first == UInt8(ascii: "[") {
            index = 1
            while index < value.count && value[index] != UInt8(ascii: "]") {
                let byte = value[index]
                guard ASCII.hexValue(byte) != nil || byte == ASCII.colon || byte == UInt8(ascii: ".") else {
                    return false
                }
                index += 1
            }
            guard index < value.count, index > 1 else { return false }
            index += 1
        } else {
            while index < value.count && isRegisteredNameByte(value[index]) { index += 1 }
            guard index > 0 else { return false }
        }
        guard index < value.count else { return true }
        guard value[index] == ASCII.colon else { return false }
        index += 1
        while index < value.count {
            guard value[index] >= 0x30 && value[index] <= 0x39 else { return false }
            index += 1
        }
        return true
    }

    private static func isRegisteredNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"): true
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "="):
            true
        default: false
        }
    }

    enum Path {
        case path(String)
        case invalid
        case nul
    }

    /// The path a target names: origin form `/path?query`, or absolute form `http://authority/path?query`
    /// (`/` when it has no path). Percent-decoded (`%XX` with two hex digits becomes its byte, any other `%`
    /// stays, as common servers do), the query dropped; `%00` is refused rather than truncating the path.
    static func path(of target: Bytes) -> Path {
        guard let first = target.first else { return .invalid }
        var from = 0
        if first != ASCII.slash {
            let scheme: Int
            if target.count >= 7 && matches(slice(target, 0, 7), "http://") {
                scheme = 7
            } else if target.count >= 8 && matches(slice(target, 0, 8), "https://") {
                scheme = 8
            } else {
                return .invalid
            }
            var authorityEnd = scheme
            while authorityEnd < target.count && target[authorityEnd] != ASCII.slash
                && target[authorityEnd] != ASCII.question
            {
                authorityEnd += 1
            }
            guard isValidHost(slice(target, scheme, authorityEnd)) else { return .invalid }
            guard authorityEnd < target.count && target[authorityEnd] == ASCII.slash else { return .path("/") }
            from = authorityEnd
        }
        var to = from
        var escaped = false
        while to < target.count && target[to] != ASCII.question {
            if target[to] == ASCII.percent { escaped = true }
            to += 1
        }
        let path = slice(target, from, to)
        guard escaped else { return .path(String(decoding: path, as: UTF8.self)) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(path.count)
        var index = 0
        while index < path.count {
            let byte = path[index]
            if byte == ASCII.percent, index + 2 < path.count, let high = ASCII.hexValue(path[index + 1]),
                let low = ASCII.hexValue(path[index + 2])
            {
                let value = high << 4 | low
                guard value != 0 else { return .nul }
                decoded.append(value)
                index += 3
            } else {
                decoded.append(byte)
                index += 1
            }
        }
        return .path(String(decoding: decoded, as: UTF8.self))
    }
}
