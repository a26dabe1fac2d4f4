import HTTP1
import Testing

/// Known answers for every rule of docs/DESIGN.md, "The HTTP front", each fed whole and in every 1-byte and 2-way
/// split (the smuggling classics among them).
@Suite("HTTP/1.1 request parser")
struct HTTP1RequestParserTests {
    typealias Code = HTTP1ParseError.Code

    let driver = ParserDriver()

    /// The events for `text`, checked to be the same for every split.
    func parse(_ text: String, driver: ParserDriver? = nil) throws -> [HTTP1RequestParser.Event] {
        try #require((driver ?? self.driver).consistentEvents(Array(text.utf8)), "a split changed the result")
    }

    /// The refusal `text` gets (failing the test if it gets none).
    func refusal(_ text: String, driver: ParserDriver? = nil) throws -> HTTP1ParseError {
        let events = try parse(text, driver: driver)
        return try #require(events.last?.refusal, "accepted: \(events.count) events")
    }

    // MARK: Accepted

    @Test func simpleGet() throws {
        let events = try parse("GET /hello HTTP/1.1\r\nHost: example.com\r\nX-A:  padded \t\r\n\r\n")
        #expect(events.count == 2)
        let head = try #require(events.first?.head)
        #expect(head.method == "GET")
        #expect(head.target == "/hello")
        #expect(head.path == "/hello")
        #expect(head.version == .http11)
        #expect(head.headers.fields.map(\.name) == ["Host", "X-A"])
        #expect(head.headers["x-a"] == "padded")
        #expect(head.headers["HOST"] == "example.com")
        #expect(head.contentLength == nil)
        #expect(!head.isChunked)
        #expect(head.keepAlive)
        #expect(!head.hasBody)
        #expect(events.last?.body == [])
    }

    @Test func bodyByContentLength() throws {
        let events = try parse("POST /v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        #expect(events.first?.head?.contentLength == 5)
        #expect(events.last?.body == Array("hello".utf8))
    }

    @Test func chunkedBodyWithExtensionsAndTrailers() throws {
        let events = try parse(
            "POST /v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n"
                + "4;name=value\r\nabcd\r\n0A;x\r\n0123456789\r\n000\r\nTrailer-A: 1\r\nTrailer-B:\r\n\r\n")
        #expect(events.first?.head?.isChunked == true)
        #expect(events.count == 2)
        #expect(events.last?.body == Array("abcd0123456789".utf8))
    }

    @Test func pipelinedRequestsComeOutInOrder() throws {
        let events = try parse(
            "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nA"
                + "POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nB\r\n0\r\n\r\n"
                + "GET /c HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(events.compactMap(\.head).map(\.path) == ["/a", "/b", "/c"])
        #expect(events.compactMap(\.body) == [Array("A".utf8), Array("B".utf8), []])
    }

    @Test func aFinishedRequestLeavesNoStorageBehindUnlessMoreBytesCame() {
        var parser = HTTP1RequestParser()
        let body = String(repeating: "x", count: 4400)
        let push = "POST /v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 4400\r\n\r\n" + body
        parser.append(contentsOf: Array(push.utf8))
        #expect(parser.heldByteCapacity >= 4400)
        #expect(parser.next().head?.path == "/v1/push")
        parser.readBody(limit: 8192)
        #expect(parser.next().body == Array(body.utf8))
        // Idle between requests: nothing of the push is held.
        #expect(parser.heldByteCapacity == 0)
        #expect(parser.bufferedByteCount == 0)

        // With the start of the next request behind it, those bytes are kept, and the request reads whole.
        parser.append(contentsOf: Array((push + "GET /b HT").utf8))
        #expect(parser.next().head?.path == "/v1/push")
        parser.readBody(limit: 8192)
        #expect(parser.next().body == Array(body.utf8))
        #expect(parser.bufferedByteCount == 9)
        #expect(parser.heldByteCapacity >= 9)
        parser.append(contentsOf: Array("TP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(parser.next().head?.path == "/b")
        parser.readBody(limit: 0)
        #expect(parser.next().body == [])
        #expect(parser.heldByteCapacity == 0)
    }

    @Test func pathIsPercentDecodedWithoutTheQuery() throws {
        let head = try #require(try parse("GET /v1/%70ush%2fx%zz%4?q=%41 HTTP/1.1\r\nHost: x\r\n\r\n").first?.head)
        #expect(head.path == "/v1/push/x%zz%4")
        #expect(head.target == "/v1/%70ush%2fx%zz%4?q=%41")
    }

    @Test(arguments: [
        ("http://example.com/v1/push?x=1", "/v1/push"), ("HTTPS://example.com:8443/a%20b", "/a b"),
        ("http://example.com", "/"), ("http://[::1]:80?q", "/"),
    ])
    func absoluteFormIsRoutedByItsPath(target: String, path: String) throws {
        let head = try #require(try parse("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n").first?.head)
        #expect(head.path == path)
    }

    @Test func http10WithoutHostAndKeepAlive() throws {
        let plain = try #require(try parse("GET / HTTP/1.0\r\n\r\n").first?.head)
        #expect(plain.version == .http10)
        #expect(!plain.keepAlive)
        let kept = try #require(try parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").first?.head)
        #expect(kept.keepAlive)
        let closed = try #require(try parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: te, close\r\n\r\n").first?.head)
        #expect(!closed.keepAlive)
    }

    @Test func expectContinueIsNoticedInHTTP11Only() throws {
        let head = try #require(
            try parse("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\nx").first?.head)
        #expect(head.expectsContinue)
        let old = try #require(try parse("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").first?.head)
        #expect(!old.expectsContinue)
    }

    @Test func valuesMayHoldObsTextAndTabs() throws {
        let bytes: [UInt8] = Array("GET / HTTP/1.1\r\nHost: x\r\nX: a\tb".utf8) + [0xC3, 0xA9] + Array("\r\n\r\n".utf8)
        let events = try #require(driver.consistentEvents(bytes))
        #expect(events.first?.head?.headers["x"] == "a\tb\u{e9}")
    }

    @Test(arguments: ["0", "00000", "1" + String(repeating: "0", count: 30)])
    func contentLengthDigits(value: String) throws {
        let events = try parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: \(value)\r\n\r\n")
        let head = try #require(events.first?.head)
        #expect(head.contentLength == Int(value) ?? Int.max)
    }

    @Test(arguments: ["localhost", "example.com:8080", "127.0.0.1", "[::1]:443", "a-b_c~d.e", "x:"])
    func validHosts(host: String) throws {
        #expect(try parse("GET / HTTP/1.1\r\nHost: \(host)\r\n\r\n").first?.head != nil)
    }

    // MARK: Request line

    @Test(arguments: [
        ("GET  / HTTP/1.1\r\nHost: x\r\n\r\n", Code.invalidRequestLine),
        ("GET /  HTTP/1.1\r\nHost: x\r\n\r\n", .invalidRequestLine),
        (" GET / HTTP/1.1\r\nHost: x\r\n\r\n", .invalidRequestLine),
        ("GET / HTTP/1.1 \r\nHost: x\r\n\r\n", .invalidRequestLine),
        ("GET /\r\n\r\n", .invalidRequestLine),
        ("GET\r\n\r\n", .invalidRequestLine),
        ("\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", .invalidRequestLine),
        ("G(T / HTTP/1.1\r\nHost: x\r\n\r\n", .invalidMethod),
        ("GET\t/ HTTP/1.1\r\nHost: x\r\n\r\n", .invalidMethod),
        ("GET /a\u{0}b HTTP/1.1\r\nHost: x\r\n\r\n", .invalidTarget),
        ("GET /a\u{7f} HTTP/1.1\r\nHost: x\r\n\r\n", .invalidTarget),
        ("GET /\u{e9} HTTP/1.1\r\nHost: x\r\n\r\n", .invalidTarget),
        ("GET /a%00b HTTP/1.1\r\nHost: x\r\n\r\n", .invalidTarget),
        ("GET * HTTP/1.1\r\nHost: x\r\n\r\n", .invalidTarget),
        ("GET v1/push HTTP/1.1\r\nHost: x\r\n\r\n", .invalidTarget),
        ("CONNECT x:443 HTTP/1.1\r\nHost: x\r\n\r\n", .invalidTarget),
        ("GET ftp://x/ HTTP/1.1\r\nHost: x\r\n\r\n", .invalidTarget),
        ("GET http://u@x/ HTTP/1.1\r\nHost: x\r\n\r\n", .invalidTarget),
        ("GET http:///a HTTP/1.1\r\nHost: x\r\n\r\n", .invalidTarget),
        ("GET / HTTP/2.0\r\nHost: x\r\n\r\n", .versionNotSupported),
        ("GET / HTTP/1.2\r\nHost: x\r\n\r\n", .versionNotSupported),
        ("GET / HTTP/0.9\r\n\r\n", .versionNotSupported),
        ("GET / HTTP/1\r\nHost: x\r\n\r\n", .invalidRequestLine),
        ("GET / http/1.1\r\nHost: x\r\n\r\n", .invalidRequestLine),
        ("GET / HTTP/1.10\r\nHost: x\r\n\r\n", .invalidRequestLine),
        ("GET / HTTP/1.1\nHost: x\r\n\r\n", .invalidLineEnding),
        ("GET / HTTP/1.1\rHost: x\r\n\r\n", .invalidLineEnding),
    ])
    func requestLineRules(request: String, code: Code) throws {
        #expect(try refusal(request).code == code)
    }

    // MARK: Field lines (the smuggling classics among them)

    @Test(arguments: [
        ("Content-Length : 10", Code.invalidFieldName),
        ("Content-Length\t: 10", .invalidFieldName),
        ("no colon here", .invalidFieldName),
        (": empty name", .invalidFieldName),
        ("X(y): 1", .invalidFieldName),
        ("X: a\u{0}b", .invalidFieldValue),
        ("X: a\u{1}b", .invalidFieldValue),
        ("X: a\u{7f}", .invalidFieldValue),
        ("X: a\rb", .invalidLineEnding),
        ("X: a\nY: b", .invalidLineEnding),
        ("X: a\r\n folded", .obsoleteLineFolding),
        ("X: a\r\n\tfolded", .obsoleteLineFolding),
    ])
    func fieldLineRules(line: String, code: Code) throws {
        #expect(try refusal("GET / HTTP/1.1\r\nHost: x\r\n\(line)\r\n\r\n").code == code)
    }

    @Test func whiteSpaceBeforeTheFirstFieldIsRefused() throws {
        #expect(try refusal("GET / HTTP/1.1\r\n Host: x\r\n\r\n").code == .obsoleteLineFolding)
    }

    @Test func bareLFEndingTheHeadIsRefused() throws {
        #expect(try refusal("GET / HTTP/1.1\r\nHost: x\r\n\n").code == .invalidLineEnding)
        #expect(try refusal("GET / HTTP/1.1\r\nHost: x\r\n\rX").code == .invalidLineEnding)
    }

    @Test(arguments: [
        "", "Host: a\r\nHost: b\r\n", "Host: x\r\nhost: x\r\n", "Host:\r\n", "Host: a b\r\n", "Host: u@x\r\n",
        "Host: x:80a\r\n", "Host: [::1\r\n", "Host: []\r\n", "Host: x/y\r\n",
    ])
    func hostRules(fields: String) throws {
        #expect(try refusal("GET / HTTP/1.1\r\n\(fields)\r\n").code == .invalidHost)
    }

    @Test func twoHostsAreRefusedInHTTP10Too() throws {
        #expect(try refusal("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n").code == .invalidHost)
    }

    @Test(arguments: [
        "Content-Length: abc", "Content-Length: 12 34", "Content-Length: -1", "Content-Length: +1",
        "Content-Length: 0x10", "Content-Length: 1.0", "Content-Length:", "Content-Length: 5, 5",
        "Content-Length: 5\r\nContent-Length: 5", "Content-Length: 5\r\nContent-Length: 6",
        "Content-Length: 5\r\ncontent-length: 5",
    ])
    func contentLengthRules(fields: String) throws {
        let request = "POST / HTTP/1.1\r\nHost: x\r\n\(fields)\r\n\r\nhello"
        #expect(try refusal(request).code == .invalidContentLength)
    }

    @Test(arguments: [
        ("Transfer-Encoding: chunked\r\nContent-Length: 5", Code.invalidTransferEncoding),
        ("Content-Length: 5\r\nTransfer-Encoding: chunked", .invalidTransferEncoding),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", .invalidTransferEncoding),
        ("Transfer-Encoding: chunked, chunked", .invalidTransferEncoding),
        ("Transfer-Encoding: gzip, chunked", .invalidTransferEncoding),
        ("Transfer-Encoding: chunked, gzip", .invalidTransferEncoding),
        ("Transfer-Encoding: identity", .invalidTransferEncoding),
        ("Transfer-Encoding: chunked;q=1", .invalidTransferEncoding),
        ("Transfer-Encoding:", .invalidTransferEncoding),
        ("Transfer-Encoding: xchunked", .unsupportedTransferCoding),
        ("Transfer-Encoding: chunked, br", .unsupportedTransferCoding),
        ("Transfer-Encoding: \"chunked\"", .unsupportedTransferCoding),
    ])
    func transferEncodingRules(fields: String, code: Code) throws {
        let request = "POST / HTTP/1.1\r\nHost: x\r\n\(fields)\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        #expect(try refusal(request).code == code)
    }

    @Test func chunkedInHTTP10IsRefused() throws {
        let request = "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        #expect(try refusal(request).code == .invalidTransferEncoding)
    }

    // MARK: Chunked framing

    func chunked(_ body: String) -> String {
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    }

    @Test(arguments: [
        ("0x5\r\nhello\r\n0\r\n\r\n", Code.invalidChunkSize),
        ("+5\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        ("-5\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        (" 5\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        ("5 \r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        ("5 ;e\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        ("\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        ("g\r\n", .invalidChunkSize),
        ("10000000000000000\r\n", .invalidChunkSize),
        ("8000000000000000\r\n", .invalidChunkSize),
        ("fffffffffffffffff1\r\n", .invalidChunkSize),
        ("5;a\u{0}b\r\nhello\r\n0\r\n\r\n", .invalidChunkSize),
        ("5\nhello\r\n0\r\n\r\n", .invalidLineEnding),
        ("5\rhello\r\n0\r\n\r\n", .invalidLineEnding),
        ("5\r\nhelloX\r\n0\r\n\r\n", .invalidChunkData),
        ("5\r\nhello\n0\r\n\r\n", .invalidChunkData),
        ("5\r\nhello\r0\r\n\r\n", .invalidChunkData),
        ("3\r\nhello\r\n0\r\n\r\n", .invalidChunkData),
        ("5\r\nhello0\r\n\r\n", .invalidChunkData),
        ("0\r\nX : y\r\n\r\n", .invalidFieldName),
        ("0\r\nX: y\r\n folded\r\n\r\n", .obsoleteLineFolding),
        ("0\r\nX: a\u{0}\r\n\r\n", .invalidFieldValue),
        ("0\r\n\n", .invalidLineEnding),
        ("0\r\nX: y\n\r\n", .invalidLineEnding),
    ])
    func chunkedRules(body: String, code: Code) throws {
        #expect(try refusal(chunked(body)).code == code)
    }

    @Test func largestChunkSizeIsStillALimitMatter() throws {
        // 2^63 - 1 is a valid size: refused for the route's limit (413), not for its syntax.
        #expect(try refusal(chunked("7fffffffffffffff\r\n")).code == .bodyTooLarge)
        // Up to 16 digits, leading zeros included; more are refused whatever their value.
        #expect(try parse(chunked("0000000000000001\r\nx\r\n0\r\n\r\n")).last?.body == [0x78])
        #expect(try refusal(chunked("00000000000000001\r\nx\r\n0\r\n\r\n")).code == .invalidChunkSize)
    }

    @Test func chunkExtensionsAreBounded() throws {
        let long = "5;" + String(repeating: "e", count: 2000) + "\r\nhello\r\n0\r\n\r\n"
        #expect(try refusal(chunked(long)).code == .invalidChunkSize)
    }

    // MARK: Limits

    @Test func targetOverItsLimitIs414AsSoonAsItIsSeen() throws {
        var driver = ParserDriver()
        driver.limits = HTTP1RequestParser.Limits(maxTargetBytes: 32, maxHeadBytes: 1024)
        let atLimit = "/" + String(repeating: "a", count: 31)
        #expect(try parse("GET \(atLimit) HTTP/1.1\r\nHost: x\r\n\r\n", driver: driver).first?.head != nil)
        // Refused without waiting for the rest of the line.
        let events = try parse("GET /v1/" + String(repeating: "a", count: 100), driver: driver)
        guard case .refused(let error, let head) = events.last else {
            Issue.record("not refused")
            return
        }
        #expect(error.code == .targetTooLong)
        #expect(error.status == 414)
        #expect(head.method == "GET")
        #expect(head.path.hasPrefix("/v1/"))
        #expect(head.target.utf8.count == 32)
    }

    /// A target over its limit is 414 even when the head's limit is no larger (the relay's are both 4 KiB): a long
    /// target makes a long head too, and the answer names the target.
    @Test func targetOverItsLimitIs414WhereTheHeadLimitIsNoLarger() throws {
        var driver = ParserDriver()
        driver.limits = HTTP1RequestParser.Limits(maxTargetBytes: 64, maxHeadBytes: 64)
        let events = try parse(
            "GET /" + String(repeating: "a", count: 100) + " HTTP/1.1\r\nHost: x\r\n\r\n", driver: driver)
        guard case .refused(let error, _) = events.last else {
            Issue.record("not refused")
            return
        }
        #expect(error.code == .targetTooLong)
        // A target within its limit in a head over its size is still 431.
        let long = try parse(
            "GET /" + String(repeating: "a", count: 40) + " HTTP/1.1\r\nHost: x\r\nX: "
                + String(repeating: "b", count: 40) + "\r\n\r\n", driver: driver)
        guard case .refused(let headError, _) = long.last else {
            Issue.record("not refused")
            return
        }
        #expect(headError.code == .headTooLarge)
    }

    @Test func headOverItsSizeIs431() throws {
        var driver = ParserDriver()
        driver.limits = HTTP1RequestParser.Limits(maxTargetBytes: 64, maxHeadBytes: 100)
        let base = "GET / HTTP/1.1\r\nHost: x\r\nX: "
        let fits = base + String(repeating: "a", count: 100 - base.utf8.count - 4) + "\r\n\r\n"
        #expect(fits.utf8.count == 100)
        #expect(try parse(fits, driver: driver).first?.head != nil)
        let over = base + String(repeating: "a", count: 100 - base.utf8.count - 3) + "\r\n\r\n"
        #expect(try refusal(over, driver: driver).code == .headTooLarge)
        // A head that never ends is refused once past the size, not held.
        #expect(try refusal(base + String(repeating: "a", count: 500), driver: driver).status == 431)
    }

    @Test func moreThanAHundredFieldLinesIs431() throws {
        let fields = (0..<99).map { "X-\($0): v\r\n" }.joined()
        #expect(try parse("GET / HTTP/1.1\r\nHost: x\r\n\(fields)\r\n").first?.head != nil)
        #expect(try refusal("GET / HTTP/1.1\r\nHost: x\r\n\(fields)Y: z\r\n\r\n").code == .headTooLarge)
    }

    @Test func trailersHaveTheHeadsLimits() throws {
        let trailers = (0..<101).map { "T-\($0): v\r\n" }.joined()
        #expect(try refusal(chunked("0\r\n\(trailers)\r\n")).code == .headTooLarge)
        var driver = ParserDriver()
        driver.limits = HTTP1RequestParser.Limits(maxTargetBytes: 64, maxHeadBytes: 200)
        let long = "0\r\nT: " + String(repeating: "t", count: 300) + "\r\n\r\n"
        #expect(try refusal(chunked(long), driver: driver).code == .headTooLarge)
    }

    @Test func declaredLengthOverTheRouteLimitIs413AtOnce() throws {
        var driver = ParserDriver()
        driver.bodyLimit = 8
        let atLimit = try parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\n12345678", driver: driver)
        #expect(atLimit.last?.body == Array("12345678".utf8))
        for length in ["9", "18446744073709551616", String(repeating: "9", count: 40)] {
            // No body byte is sent: the refusal must not wait for one.
            let events = try parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: \(length)\r\n\r\n", driver: driver)
            #expect(events.count == 2)
            #expect(events.last?.refusal?.status == 413)
        }
    }

    @Test func chunkedBodyGrowingPastTheRouteLimitIs413() throws {
        var driver = ParserDriver()
        driver.bodyLimit = 8
        let fits = try parse(chunked("4\r\nabcd\r\n4\r\nefgh\r\n0\r\n\r\n"), driver: driver)
        #expect(fits.last?.body == Array("abcdefgh".utf8))
        // Refused at the size line that would pass the limit, before its data.
        #expect(try refusal(chunked("4\r\nabcd\r\n5\r\n"), driver: driver).code == .bodyTooLarge)
    }

    @Test func bodyReadWithoutKeepingIsDropped() {
        var parser = HTTP1RequestParser()
        parser.append(contentsOf: Array("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET".utf8))
        #expect(parser.next().head != nil)
        #expect(parser.next() == .needMoreBytes)
        #expect(parser.readBody(limit: 10, keep: false) == nil)
        #expect(parser.next() == .body([]))
        #expect(parser.bufferedByteCount == 3)
        #expect(!parser.isAtRequestBoundary)
        #expect(parser.next() == .needMoreBytes)
    }

    @Test func aRefusalIsFinal() {
        var parser = HTTP1RequestParser()
        parser.append(contentsOf: Array("GET / HTTP/1.1\nHost: x\r\n\r\n".utf8))
        let first = parser.next()
        #expect(first.refusal?.code == .invalidLineEnding)
        parser.append(contentsOf: Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(parser.next() == first)
    }

    @Test func refusalsCarryTheHeadAsRead() throws {
        let events = try parse("POST /v1/grant HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
        guard case .refused(let error, let head) = events.last else {
            Issue.record("not refused")
            return
        }
        #expect(error.status == 400)
        #expect(head.path == "/v1/grant")
        #expect(head.headers.values("content-length") == ["1", "2"])
    }

    @Test func statusesAreMappedInOnePlace() {
        let expected: [(Code, Int, String)] = [
            (.invalidRequestLine, 400, "bad_request"), (.obsoleteLineFolding, 400, "bad_request"),
            (.bodyTooLarge, 413, "too_large"), (.targetTooLong, 414, "too_large"), (.headTooLarge, 431, "too_large"),
            (.unsupportedTransferCoding, 501, "not_implemented"),
            (.versionNotSupported, 505, "version_not_supported"),
        ]
        for (code, status, name) in expected {
            #expect(code.status == status)
            #expect(code.errorName == name)
        }
        #expect(HTTP1ParseError(.invalidHost, "a") == HTTP1ParseError(.invalidHost, "b"))
    }
}
