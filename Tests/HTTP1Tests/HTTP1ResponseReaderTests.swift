import HTTP1
import RelayTestSupport
import Testing

/// The response reader's rules, each fed whole, a byte at a time and in every 2-way split: the same events every
/// time. Its callers' verdicts (the tunnel's, `duo-relay push`'s) are tested with them.
@Suite("HTTP/1.1 response reader")
struct HTTP1ResponseReaderTests {
    typealias Limits = HTTP1ResponseReader.Limits

    /// The events for `pieces` fed in turn (each event after every piece, heads' bodies read as they come), then
    /// the end of input when `end`; up to the first failure.
    static func events(_ pieces: [ArraySlice<UInt8>], limits: Limits = Limits(), end: Bool = false)
        -> [HTTP1ResponseReader.Event]
    {
        var reader = HTTP1ResponseReader(limits: limits)
        var events: [HTTP1ResponseReader.Event] = []
        func drain() -> Bool {
            while true {
                let event = reader.next()
                switch event {
                case .needMoreBytes: return true
                case .head:
                    events.append(event)
                    reader.readBody()
                case .interim, .body: events.append(event)
                case .end, .failed:
                    events.append(event)
                    return false
                }
            }
        }
        for piece in pieces {
            reader.append(contentsOf: piece)
            guard drain() else { return events }
        }
        if end {
            reader.finishInput()
            _ = drain()
        }
        return events
    }

    /// The events for `text`, checked to be the same whole, a byte at a time and split in two anywhere.
    static func consistentEvents(_ text: String, limits: Limits = Limits(), end: Bool = false)
        -> [HTTP1ResponseReader.Event]
    {
        let bytes = Array(text.utf8)
        let whole = events([bytes[...]], limits: limits, end: end)
        #expect(events(bytes.indices.map { bytes[$0...$0] }, limits: limits, end: end) == whole, "a byte at a time")
        for split in 1..<max(1, bytes.count) {
            #expect(
                events([bytes[..<split], bytes[split...]], limits: limits, end: end) == whole, "split at \(split)")
        }
        return whole
    }

    static func failure(_ text: String, limits: Limits = Limits(), end: Bool = false) -> HTTP1ResponseError? {
        if case .failed(let error) = consistentEvents(text, limits: limits, end: end).last { return error }
        return nil
    }

    static func head(_ events: [HTTP1ResponseReader.Event]) -> HTTP1ResponseHead? {
        for event in events { if case .head(let head) = event { return head } }
        return nil
    }

    // MARK: Status lines and heads

    @Test(arguments: [
        ("HTTP/1.1 200 Connection established\r\n\r\n", 200, "Connection established"),
        ("HTTP/1.0 200 Connection established\r\nProxy-agent: tinyproxy/1.11.1\r\n\r\n", 200, "Connection established"),
        ("HTTP/1.1 200 OK\r\nVia: 1.1 squid\r\nContent-Length: 0\r\n\r\n", 200, "OK"),
        ("HTTP/1.1 204\r\n\r\n", 204, ""),
        ("HTTP/1.1 200 \r\n\r\n", 200, ""),
        (
            "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"x\"\r\n\r\n", 407,
            "Proxy Authentication Required"
        ),
        ("HTTP/1.1 503\r\n\r\n", 503, ""),
    ])
    func aStatusLineGivesItsStatusAndReason(answer: String, status: Int, reason: String) throws {
        let head = try #require(Self.head(Self.consistentEvents(answer)))
        #expect(head.status == status)
        #expect(head.reason == reason)
        #expect(head.statusLine == (reason.isEmpty ? "\(status)" : "\(status) \(reason)"))
    }

    @Test(
        arguments: MalformedAnswers.heads + [
            "HTTP/1.1 200 OK\r\nContent-Length: two\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n",
            "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        ])
    func aMalformedAnswerFails(answer: String) {
        #expect(Self.failure(answer) != nil, "\(answer.debugDescription) was taken")
    }

    @Test(arguments: [
        ("SSH-2.0-OpenSSH_9.6\r\n\r\n", HTTP1ResponseError.Code.invalidStatusLine),
        ("HTTP/1.1 200 OK\r\n Folded: line\r\n\r\n", .obsoleteLineFolding),
        ("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", .invalidFieldName),
        ("HTTP/1.1 200 OK\r\nName: bell\u{07}\r\n\r\n", .invalidFieldValue),
        ("HTTP/1.1 200 OK\nVia: x\r\n\r\n", .invalidLineEnding),
        ("HTTP/1.1 200 OK\r\nContent-Length: two\r\n\r\n", .invalidContentLength),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", .invalidTransferEncoding),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", .invalidChunkSize),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XY", .invalidChunkData),
        ("HTTP/1.1 200 OK\r\n\r\n{}", .unframedBody),
    ])
    func eachRuleHasItsCode(answer: String, code: HTTP1ResponseError.Code) {
        #expect(Self.failure(answer)?.code == code, "\(answer.debugDescription)")
    }

    @Test func garbageFailsOnItsFirstBytes() {
        // Something other than HTTP, with no blank line, fails as it arrives, not when the caller's time runs out.
        #expect(Self.failure("\u{15}\u{03}\u{03}") != nil)
        #expect(Self.failure("HTTP/1.1 200 OK\n") != nil)
    }

    @Test func anOversizedHeadFailsOnceOverItsLimit() {
        let limit = Limits().maxHeadBytes
        var reader = HTTP1ResponseReader()
        reader.append(contentsOf: Array("HTTP/1.1 200 OK\r\n".utf8))
        #expect(reader.next() == .needMoreBytes)
        let line = Array("X-Padding: \(String(repeating: "p", count: 90))\r\n".utf8)
        var event = HTTP1ResponseReader.Event.needMoreBytes
        var fed = 17
        while event == .needMoreBytes && fed < 2 * limit {
            reader.append(contentsOf: line)
            event = reader.next()
            fed += line.count
        }
        #expect(event == .failed(HTTP1ResponseError(.headTooLarge, "")))
        #expect(fed <= limit + line.count)
        // A head whose blank line comes just past the bound, in one read, fails too.
        let big = "HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: limit) + "\r\n\r\n"
        #expect(Self.events([Array(big.utf8)[...]]).last == .failed(HTTP1ResponseError(.headTooLarge, "")))
    }

    @Test func tooManyHeaderLinesFail() {
        let limit = Limits().maxFieldLines
        let lines = String(repeating: "A: b\r\n", count: limit + 1)
        #expect(Self.failure("HTTP/1.1 200 OK\r\n" + lines + "\r\n")?.code == .headTooLarge)
        let allowed = String(repeating: "A: b\r\n", count: limit)
        let head = Self.head(Self.events([Array(("HTTP/1.1 200 OK\r\n" + allowed + "\r\n").utf8)[...]]))
        #expect(head?.headers.fields.count == limit)
    }

    @Test func theBytesAfterAHeadCanBeTakenWhole() {
        // After a 2xx to CONNECT, what follows the blank line is the tunnelled server's: any byte (NUL, LF).
        let server: [UInt8] = [0x16, 0x03, 0x03, 0x00, 0x0A, 0x0A, 0x00, 0x0D, 0x0A, 0xFF]
        var reader = HTTP1ResponseReader()
        reader.append(contentsOf: Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8) + server)
        #expect(Self.head([reader.next()])?.status == 200)
        #expect(reader.bufferedByteCount == server.count)
        #expect(reader.takeBufferedBytes() == server)
    }

    // MARK: Bodies

    @Test("a body framed by Content-Length completes with its last byte; names in any case")
    func contentLength() throws {
        let text = "HTTP/1.1 429 Too Many Requests\r\nX: y\r\ncontent-LENGTH: 5\r\n\r\nhello"
        let events = Self.consistentEvents(text)
        #expect(Self.head(events)?.contentLength == 5)
        #expect(events.last == .body(Array("hello".utf8)))
        #expect(Self.events([Array(text.utf8).dropLast()]).last != .body(Array("hello".utf8)))
        #expect(Self.consistentEvents("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n").isEmpty)
    }

    @Test("answers on one connection are read in turn; a partial next one stays buffered")
    func pipelined() {
        let first = "HTTP/1.1 429 Too Many Requests\r\nX: y\r\ncontent-LENGTH: 5\r\n\r\nhello"
        var reader = HTTP1ResponseReader()
        reader.append(contentsOf: Array((first + "HTTP/1.1 200 OK\r\n").utf8))
        guard case .complete(let head, let body) = reader.nextResponse() else {
            Issue.record("no first answer")
            return
        }
        #expect(head.status == 429)
        #expect(body == Array("hello".utf8))
        #expect(reader.nextResponse() == .needMoreBytes)
        reader.append(contentsOf: Array("Content-Length: 2\r\n\r\n{}".utf8))
        #expect(
            reader.nextResponse()
                == .complete(
                    HTTP1ResponseHead(
                        status: 200, reason: "OK",
                        headers: HTTP1Headers([
                            (name: "Content-Length", value: "2")
                        ]), contentLength: 2), body: Array("{}".utf8)))
    }

    @Test("a chunked body's chunks are joined, chunk extensions and trailers skipped")
    func chunked() {
        let text =
            "HTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "9;name=x\r\n{\"error\":\r\n7\r\n\"apns\"}\r\n0\r\nX-Trailer: 1\r\n\r\n"
        let events = Self.consistentEvents(text)
        #expect(Self.head(events)?.isChunked == true)
        #expect(events.last == .body(Array(#"{"error":"apns"}"#.utf8)))
        #expect(Self.events([Array(text.utf8).dropLast(2)]).count == 1, "complete before its last CRLF")
    }

    @Test("interim answers come before the final one, bounded; 204, 304 and a HEAD's answer have no body")
    func interimAndBodyless() {
        let text =
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
        let events = Self.consistentEvents(text)
        #expect(events.count == 4)
        #expect(events.last == .body([]))
        #expect(Self.consistentEvents("HTTP/1.0 304 Not Modified\r\n\r\n").last == .body([]))
        let limit = Limits().maxInterimAnswers
        let interim = String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: limit + 1) + "HTTP/1.1 200 OK\r\n\r\n"
        #expect(Self.failure(interim)?.code == .tooManyInterimAnswers)
        let allowed = String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: limit)
        #expect(Self.head(Self.consistentEvents(allowed + "HTTP/1.1 204 No Content\r\n\r\n"))?.status == 204)

        var reader = HTTP1ResponseReader()
        reader.append(contentsOf: Array("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n".utf8))
        guard case .complete(let head, let body) = reader.nextResponse(headRequest: true) else {
            Issue.record("the answer to HEAD waited for a body")
            return
        }
        #expect(head.contentLength == 7 && body.isEmpty)
    }

    @Test("a body framed by the connection's end completes only at the end, where the caller allows it")
    func framedByTheEnd() {
        let text =
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nConnection: close\r\n\r\n{\"error\":\"rate_limited\"}"
        let allowing = Limits(bodyMayEndWithConnection: true)
        let open = Self.consistentEvents(text, limits: allowing)
        #expect(open.count == 1)
        #expect(Self.head(open)?.keepAlive == false)
        let ended = Self.consistentEvents(text, limits: allowing, end: true)
        #expect(ended.dropFirst() == [.body(Array(#"{"error":"rate_limited"}"#.utf8)), .end])
        #expect(Self.failure(text)?.code == .unframedBody)
    }

    @Test("the end of input inside the head or a framed body is truncation; between answers, the end")
    func endInside() {
        for text in [
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n",
        ] {
            #expect(Self.failure(text, end: true)?.code == .truncated, "\(text.debugDescription)")
        }
        #expect(Self.consistentEvents("", end: true) == [.end])
        #expect(Self.consistentEvents("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", end: true).last == .end)
    }

    @Test("a body over the limit fails: declared, chunked or read to the end")
    func bounded() {
        let limits = Limits(maxBodyBytes: 4, bodyMayEndWithConnection: true)
        #expect(Self.failure("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", limits: limits)?.code == .bodyTooLarge)
        #expect(Self.consistentEvents("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd", limits: limits).count == 2)
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\n"
        #expect(Self.failure(chunked, limits: limits)?.code == .bodyTooLarge)
        #expect(Self.failure("HTTP/1.1 200 OK\r\n\r\nabcde", limits: limits)?.code == .bodyTooLarge)
    }

    @Test("a failure is final")
    func failureIsFinal() {
        var reader = HTTP1ResponseReader()
        reader.append(contentsOf: Array("SSH-2.0\r\n".utf8))
        let failed = reader.next()
        #expect(failed == .failed(HTTP1ResponseError(.invalidStatusLine, "")))
        reader.append(contentsOf: Array("HTTP/1.1 200 OK\r\n\r\n".utf8))
        #expect(reader.next() == failed)
    }
}
