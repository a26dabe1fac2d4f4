/// The relay's strict, incremental HTTP/1.1 request parser (RFC 9112 as docs/DESIGN.md, "The HTTP front", narrows it).
///
/// Bytes go in with ``append(_:)`` as they arrive, in any split; ``next()`` then says what they hold: a head, a
/// whole body, a refusal, or that more bytes are needed. The same bytes give the same events however they are split:
/// every decision is made at a byte's position in the stream, never at the end of a read.
///
/// After ``Event/head(_:)`` the caller decides the body's limit (it is per route) with ``readBody(limit:keep:)``;
/// until then the parser reads nothing more. Bytes of later requests (pipelining) stay buffered
/// (``bufferedByteCount``) until the current request is done. A refusal is final: the connection must close.
public struct HTTP1RequestParser: Sendable {
    /// What a head may hold. Defaults are the relay's (docs/DESIGN.md, "Limits").
    public struct Limits: Sendable, Equatable {
        /// The longest target; longer: 414.
        public var maxTargetBytes: Int
        /// The largest head, request line to the empty line included (and the largest trailer section); larger: 431.
        public var maxHeadBytes: Int
        /// The most field lines in a head (and in a trailer section); more: 431.
        public var maxFieldLines: Int

        /// Creates limits.
        public init(maxTargetBytes: Int = 4096, maxHeadBytes: Int = 8192, maxFieldLines: Int = 100) {
            self.maxTargetBytes = maxTargetBytes
            self.maxHeadBytes = maxHeadBytes
            self.maxFieldLines = maxFieldLines
        }
    }

    /// What the bytes so far hold.
    public enum Event: Sendable, Equatable {
        /// Nothing more can be said until more bytes arrive (or, after ``head(_:)``, until
        /// ``readBody(limit:keep:)``).
        case needMoreBytes
        /// A request's head is complete; its body is not read until ``readBody(limit:keep:)`` sets its limit.
        case head(HTTP1RequestHead)
        /// The request's whole body, decoded (empty without one, or when read with `keep: false`): the request is
        /// complete, and the next event belongs to the next request.
        case body([UInt8])
        /// The request is refused. The head holds what was read of it (an empty method or path when the request
        /// line was not complete; for a 414, the target's first ``Limits/maxTargetBytes`` bytes), so that a handler
        /// can count the refusal against its route. Final: every later call returns it again.
        case refused(HTTP1ParseError, HTTP1RequestHead)
    }

    /// The parser's limits.
    public let limits: Limits

    /// Bytes received and not yet consumed, and where the scan of a head or trailer section is.
    private var input = ScanBuffer()
    private var state = State.head
    var lines = LineScan()
    /// The head whose body is being read (or that waits for its body limit).
    private var current: HTTP1RequestHead?
    private var body: [UInt8] = []
    private var bodyLength = 0
    private var bodyLimit = 0
    private var keepBody = true

    enum State: Sendable {
        /// Scanning a head (`lines` holds where).
        case head
        /// The head was returned; waiting for ``readBody(limit:keep:)``.
        case awaitingBodyLimit
        case lengthBody(remaining: Int)
        /// Reading a chunked body's framing, up to the end of its trailer section.
        case chunked(ChunkScan)
        case failed(HTTP1ParseError, HTTP1RequestHead)
    }

    /// Creates a parser with no bytes yet.
    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Bytes received and not yet consumed (a head being read, or requests pipelined behind the current one).
    public var bufferedByteCount: Int { input.unconsumedCount }

    /// Bytes of storage the parser holds for what it receives (none between requests when nothing more has come).
    public var heldByteCapacity: Int {
        input.bytes.capacity + lines.fields.capacity * MemoryLayout<LineScan.FieldRange>.stride
    }

    /// Whether the parser is between requests with no byte of the next one yet: an idle connection.
    public var isAtRequestBoundary: Bool {
        if case .head = state { return input.bytes.count == input.position }
        return false
    }

    /// Whether the current request's head is complete and its body (if any) not yet wholly read.
    public var isReadingBody: Bool {
        switch state {
        case .head, .failed: false
        default: true
        }
    }

    /// Adds bytes received.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        input.append(bytes)
    }

    /// Adds bytes received.
    public mutating func append(contentsOf bytes: some Collection<UInt8>) {
        input.append(contentsOf: bytes)
    }

    /// Sets the limit of the body of the head just returned, and starts reading it. A declared `Content-Length`
    /// over `limit` refuses the request at once (returned, and from ``next()``); a chunked body is refused as soon
    /// as its decoded size would pass `limit`. With `keep: false` the body is read and dropped (an answer chosen
    /// from the head alone, on a connection that stays open).
    @discardableResult
    public mutating func readBody(limit: Int, keep: Bool = true) -> HTTP1ParseError? {
        guard case .awaitingBodyLimit = state, let head = current else { return nil }
        bodyLimit = max(0, limit)
        keepBody = keep
        body = []
        bodyLength = 0
        if head.isChunked {
            state = .chunked(ChunkScan())
            return nil
        }
        let length = head.contentLength ?? 0
        if length > bodyLimit {
            return fail(.bodyTooLarge, "Content-Length over the route's body limit", head)
        }
        if keep && length > 0 {
            body.reserveCapacity(length)
        }
        state = .lengthBody(remaining: length)
        return nil
    }

    /// What the bytes so far hold; see ``Event``.
    public mutating func next() -> Event {
        let bytes = input.bytes
        return bytes.withUnsafeBufferPointer { step($0) }
    }

    private mutating func step(_ bytes: UnsafeBufferPointer<UInt8>) -> Event {
        switch state {
        case .failed(let error, let head):
            return .refused(error, head)
        case .awaitingBodyLimit:
            return .needMoreBytes
        case .head:
            return scanHead(bytes)
        default:
            return readBody(bytes)
        }
    }

    @discardableResult
    mutating func fail(_ code: HTTP1ParseError.Code, _ reason: String, _ head: HTTP1RequestHead) -> HTTP1ParseError {
        let error = HTTP1ParseError(code, reason)
        state = .failed(error, head)
        current = nil
        body = []
        return error
    }

    // MARK: - Head

    private mutating func scanHead(_ bytes: UnsafeBufferPointer<UInt8>) -> Event {
        if input.scan == input.position && input.scan < bytes.count {
            lines = LineScan()
        }
        var index = input.scan
        let outcome = lines.scan(bytes, from: input.position, at: &index, limits: limits, isTrailer: false)
        input.scan = index
        switch outcome {
        case .needMoreBytes:
            return .needMoreBytes
        case .failed(let code, let reason):
            let partial = lines.partialHead(bytes, start: input.position, upTo: input.scan, limits: limits)
            fail(code, reason, partial)
            return step(bytes)
        case .complete:
            switch lines.makeHead(bytes, start: input.position) {
            case .failure(let refusal):
                fail(refusal.code, refusal.reason, refusal.head)
                return step(bytes)
            case .success(let head):
                input.position = input.scan
                current = head
                state = .awaitingBodyLimit
                return .head(head)
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
                take(bytes, count)
                if count < remaining {
                    state = .lengthBody(remaining: remaining - count)
                    return .needMoreBytes
                }
                return finish()
            case .chunked(var chunks):
                state = .head  // a placeholder while the scan is out of the state
                let outcome = chunks.scan(bytes, in: &input, room: bodyLimit - bodyLength, limits: limits)
                state = .chunked(chunks)
                switch outcome {
                case .needMoreBytes:
                    return .needMoreBytes
                case .data(let range):
                    take(bytes, range)
                case .complete:
                    // Trailer fields are dropped: nothing in the relay reads them.
                    return finish()
                case .tooLarge:
                    return refuse(.bodyTooLarge, "chunked body over the route's body limit", bytes)
                case .failed(let code, let reason):
                    return refuse(code, reason, bytes)
                }
            case .head, .awaitingBodyLimit, .failed:
                return step(bytes)
            }
        }
    }

    private mutating func take(_ bytes: UnsafeBufferPointer<UInt8>, _ count: Int) {
        take(bytes, input.position..<input.position + count)
        input.position += count
    }

    private mutating func take(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) {
        if keepBody && !range.isEmpty {
            body.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[range]))
        }
        bodyLength += range.count
    }

    private mutating func finish() -> Event {
        let whole = body
        body = []
        current = nil
        state = .head
        input.scan = input.position
        // Nothing of a finished request is kept: the next head's scan starts afresh (as it would anyway).
        input.releaseIfConsumed()
        lines = LineScan()
        return .body(whole)
    }

    private mutating func refuse(
        _ code: HTTP1ParseError.Code, _ reason: String, _ bytes: UnsafeBufferPointer<UInt8>
    ) -> Event {
        let head = current ?? HTTP1RequestHead(method: "", target: "", path: "")
        let error = fail(code, reason, head)
        return .refused(error, head)
    }
}
