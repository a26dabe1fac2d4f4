/// Reads HTTP/1.1 answers from the bytes a server sends, as strictly as ``HTTP1RequestParser`` reads requests and on
/// the same line scanner: CRLF line ends only, a field name a token followed at once by `:`, no obsolete line
/// folding, no control byte, a bounded head; a body framed by `Content-Length`, by one `chunked` coding, or (where
/// the caller allows it) by the connection's end (RFC 9112, 6.3).
///
/// Pure and incremental: bytes go in with ``append(_:)`` as they arrive, in any split; ``next()`` says what they
/// hold (the same events for the same bytes however they are split), or ``nextResponse(headRequest:)`` gives whole
/// answers. ``finishInput()`` says the connection ended. A failure is final: the connection cannot be read further.
///
/// After ``Event/head(_:)`` the reader waits: ``readBody(headRequest:)`` reads the body the head frames; a caller
/// that sent `CONNECT` takes the bytes after a 2xx head as the tunnel's with ``takeBufferedBytes()`` instead.
public struct HTTP1ResponseReader: Sendable {
    /// What an answer may hold.
    public struct Limits: Sendable, Equatable {
        /// The largest head, status line to the empty line included (and the largest trailer section).
        public var maxHeadBytes: Int
        /// The most field lines in a head (and in a trailer section).
        public var maxFieldLines: Int
        /// The largest body: declared, decoded from chunks, or read up to the connection's end.
        public var maxBodyBytes: Int
        /// The most interim (1xx) answers before a final one.
        public var maxInterimAnswers: Int
        /// Whether a body framed by neither `Content-Length` nor `chunked` is read up to the connection's end
        /// (RFC 9112, 6.3, rule 8); if not, such an answer is refused (``HTTP1ResponseError/Code/unframedBody``).
        public var bodyMayEndWithConnection: Bool

        /// Creates limits.
        public init(
            maxHeadBytes: Int = 8192, maxFieldLines: Int = 100, maxBodyBytes: Int = 1 << 20, maxInterimAnswers: Int = 7,
            bodyMayEndWithConnection: Bool = false
        ) {
            self.maxHeadBytes = maxHeadBytes
            self.maxFieldLines = maxFieldLines
            self.maxBodyBytes = maxBodyBytes
            self.maxInterimAnswers = maxInterimAnswers
            self.bodyMayEndWithConnection = bodyMayEndWithConnection
        }
    }

    /// What the bytes so far hold.
    public enum Event: Sendable, Equatable {
        /// Nothing more can be said until more bytes arrive (or, after ``head(_:)``, until ``readBody(headRequest:)``).
        case needMoreBytes
        /// An interim (1xx) answer's head: it has no body, and the final answer follows it.
        case interim(HTTP1ResponseHead)
        /// A final answer's head; its body is not read until ``readBody(headRequest:)``.
        case head(HTTP1ResponseHead)
        /// The answer's whole body, decoded (empty without one): the answer is complete, and the next event
        /// belongs to the next answer.
        case body([UInt8])
        /// The input ended between answers, with no byte of another.
        case end
        /// The bytes are not an answer the reader takes. Final: every later call returns it again.
        case failed(HTTP1ResponseError)
    }

    /// A whole answer, or why there is none yet.
    public enum Response: Sendable, Equatable {
        case needMoreBytes
        /// A final answer and its decoded body.
        case complete(HTTP1ResponseHead, body: [UInt8])
        /// The input ended between answers.
        case end
        case failed(HTTP1ResponseError)
    }

    /// The reader's limits.
    public let limits: Limits

    /// Bytes received and not yet consumed, and where the scan of a head or trailer section is.
    private var input = ScanBuffer()
    private var state = State.head
    private var lines = LineScan(statusLine: ())
    private var interimAnswers = 0
    /// The final head whose body is being read.
    private var current: HTTP1ResponseHead?
    private var body: [UInt8] = []
    private var inputEnded = false

    enum State: Sendable {
        /// Scanning a head (`lines` holds where).
        case head
        /// The final head was returned; waiting for ``readBody(headRequest:)``.
        case awaitingBody(HTTP1ResponseHead)
        case lengthBody(remaining: Int)
        /// Reading a chunked body's framing, up to the end of its trailer section.
        case chunked(ChunkScan)
        /// Every byte up to the connection's end is the body.
        case untilEnd
        case failed(HTTP1ResponseError)
    }

    /// Creates a reader with no bytes yet.
    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Bytes received and not yet consumed.
    public var bufferedByteCount: Int { input.unconsumedCount }

    /// Adds bytes received.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        input.append(bytes)
    }

    /// Adds bytes received.
    public mutating func append(contentsOf bytes: some Collection<UInt8>) {
        input.append(contentsOf: bytes)
    }

    /// The connection ended: no byte follows what was appended. A body framed by the end is complete with it; the
    /// end inside a head or a framed body fails the answer (``HTTP1ResponseError/Code/truncated``).
    public mutating func finishInput() {
        inputEnded = true
    }

    /// The bytes received after the head just returned, taken out of the reader: after a 2xx answer to `CONNECT`,
    /// the tunnelled server's first bytes. The reader reads nothing more.
    public mutating func takeBufferedBytes() -> [UInt8] {
        let rest = Array(input.bytes[input.position...])
        input = ScanBuffer()
        state = .failed(HTTP1ResponseError(.truncated, "the rest of the connection was taken from the reader"))
        return rest
    }

    /// Starts reading the body of the final head just returned, framed as RFC 9112, 6.3 says: none after a `HEAD`
    /// request (`headRequest`) or for a 204 or 304, else by `chunked`, by `Content-Length`, or by the connection's
    /// end where ``Limits/bodyMayEndWithConnection`` allows it. A declared length over the limit fails at once.
    public mutating func readBody(headRequest: Bool = false) {
        guard case .awaitingBody(let head) = state else { return }
        body = []
        if headRequest || head.status == 204 || head.status == 304 {
            state = .lengthBody(remaining: 0)
        } else if head.isChunked {
            state = .chunked(ChunkScan())
        } else if let length = head.contentLength {
            guard length <= limits.maxBodyBytes else {
                fail(.bodyTooLarge, "Content-Length over the reader's body limit")
                return
            }
            body.reserveCapacity(length)
            state = .lengthBody(remaining: length)
        } else if limits.bodyMayEndWithConnection {
            state = .untilEnd
        } else {
            fail(.unframedBody, "a body framed by neither Content-Length nor chunked")
        }
    }

    /// The next whole final answer: interim answers skipped, each body read as its head frames it (`headRequest`:
    /// the answer to a `HEAD` request, which has none).
    public mutating func nextResponse(headRequest: Bool = false) -> Response {
        while true {
            switch next() {
            case .needMoreBytes:
                guard case .awaitingBody = state else { return .needMoreBytes }
                readBody(headRequest: headRequest)
            case .interim:
                continue
            case .head:
                readBody(headRequest: headRequest)
            case .body(let bytes):
                guard let head = current else {
                    return .failed(HTTP1ResponseError(.truncated, "a body without its head"))
                }
                return .complete(head, body: bytes)
            case .end:
                return .end
            case .failed(let error):
                return .failed(error)
            }
        }
    }

    /// What the bytes so far hold; see ``Event``.
    public mutating func next() -> Event {
        let bytes = input.bytes
        return bytes.withUnsafeBufferPointer { step($0) }
    }

    private mutating func step(_ bytes: UnsafeBufferPointer<UInt8>) -> Event {
        switch state {
        case .failed(let error): return .failed(error)
        case .awaitingBody:
            return inputEnded ? fail(.truncated, "the connection ended before the body") : .needMoreBytes
        case .head: return scanHead(bytes)
        default: return readBody(bytes)
        }
    }

    @discardableResult
    private mutating func fail(_ code: HTTP1ResponseError.Code, _ reason: String) -> Event {
        let error = HTTP1ResponseError(code, reason)
        state = .failed(error)
        body = []
        return .failed(error)
    }

    /// A line scan's refusal in the reader's codes (the scan's codes are the request parser's).
    private mutating func fail(scan code: HTTP1ParseError.Code, _ reason: String) -> Event {
        let mapped: HTTP1ResponseError.Code =
            switch code {
            case .invalidLineEnding: .invalidLineEnding
            case .invalidFieldName: .invalidFieldName
            case .obsoleteLineFolding: .obsoleteLineFolding
            case .invalidFieldValue: .invalidFieldValue
            case .headTooLarge: .headTooLarge
            case .invalidChunkSize: .invalidChunkSize
            case .invalidChunkData: .invalidChunkData
            default: .invalidStatusLine
            }
        return fail(mapped, reason)
    }

    private var scanLimits: HTTP1RequestParser.Limits {
        HTTP1RequestParser.Limits(
            maxTargetBytes: 0, maxHeadBytes: limits.maxHeadBytes, maxFieldLines: limits.maxFieldLines)
    }

    // MARK: - Head

    private mutating func scanHead(_ bytes: UnsafeBufferPointer<UInt8>) -> Event {
        if input.scan == input.position && input.scan < bytes.count {
            lines = LineScan(statusLine: ())
        }
        var index = input.scan
        let outcome = lines.scan(bytes, from: input.position, at: &index, limits: scanLimits, isTrailer: false)
        input.scan = index
        switch outcome {
        case .needMoreBytes:
            guard inputEnded else { return .needMoreBytes }
            return input.position == bytes.count
                ? .end : fail(.truncated, "the connection ended inside an answer's head")
        case .failed(let code, let reason):
            return fail(scan: code, reason)
        case .complete:
            switch lines.makeResponseHead(bytes, start: input.position) {
            case .failure(let error):
                return fail(error.code, error.reason)
            case .success(let head):
                input.position = input.scan
                guard head.isInterim else {
                    interimAnswers = 0
                    current = head
                    state = .awaitingBody(head)
                    return .head(head)
                }
                interimAnswers += 1
                guard interimAnswers <= limits.maxInterimAnswers else {
                    return fail(.tooManyInterimAnswers, "more interim answers than the limit")
                }
                return .interim(head)
            }
        }
    }

    // MARK: - Body

    private mutating func readBody(_ bytes: UnsafeBufferPointer<UInt8>) -> Event {
        let end = bytes.count
        while true {
            switch state {
            case .lengthBody(let remaining):
                let count = min(remaining, end - input.position)
                take(bytes, input.position..<input.position + count)
                input.position += count
                if count < remaining {
                    state = .lengthBody(remaining: remaining - count)
                    return inputEnded ? fail(.truncated, "the connection ended inside a body") : .needMoreBytes
                }
                return finish()
            case .chunked(var chunks):
                state = .head  // a placeholder while the scan is out of the state
                let outcome = chunks.scan(bytes, in: &input, room: limits.maxBodyBytes - body.count, limits: scanLimits)
                state = .chunked(chunks)
                switch outcome {
                case .needMoreBytes:
                    return inputEnded ? fail(.truncated, "the connection ended inside a chunked body") : .needMoreBytes
                case .data(let range):
                    take(bytes, range)
                case .complete:
                    // Trailer fields are dropped: no caller reads them.
                    return finish()
                case .tooLarge:
                    return fail(.bodyTooLarge, "a chunked body over the reader's body limit")
                case .failed(let code, let reason):
                    return fail(scan: code, reason)
                }
            case .untilEnd:
                guard body.count + (end - input.position) <= limits.maxBodyBytes else {
                    return fail(.bodyTooLarge, "a body read to the connection's end over the reader's body limit")
                }
                take(bytes, input.position..<end)
                input.position = end
                return inputEnded ? finish() : .needMoreBytes
            case .head, .awaitingBody, .failed:
                return step(bytes)
            }
        }
    }

    private mutating func take(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) {
        if !range.isEmpty {
            body.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[range]))
        }
    }

    private mutating func finish() -> Event {
        let whole = body
        body = []
        state = .head
        input.scan = input.position
        return .body(whole)
    }
}
