import HTTP1
import MonotonicTime
import Testing

/// The connection machine driven alone with a test clock: each deadline of docs/DESIGN.md, "The HTTP front",
/// keep-alive and pipelining, half-close, and the answers to refusals with their lingering close.
@Suite("HTTP/1.1 connection state machine")
struct HTTP1ConnectionTests {
    static let second: UInt64 = 1_000_000_000
    static let timeout = 10 * second

    /// A connection and its test clock; every input goes through here and its action is kept.
    struct Harness {
        var connection: HTTP1Connection
        var now = Instant(nanoseconds: 5 * second)
        var written: [UInt8] = []

        init(_ configure: (inout HTTP1Connection.Configuration) -> Void = { _ in }) {
            var configuration = HTTP1Connection.Configuration(timeout: HTTP1ConnectionTests.timeout)
            configure(&configuration)
            connection = HTTP1Connection(configuration: configuration, now: now)
        }

        mutating func record(_ action: HTTP1Connection.Action) -> HTTP1Connection.Action {
            if let bytes = action.write { written += bytes }
            return action
        }

        /// As the shell would: from a buffer it lends.
        @discardableResult
        mutating func receive(_ text: String) -> HTTP1Connection.Action {
            let bytes = Array(text.utf8)
            return bytes.withUnsafeBytes { buffer in record(connection.received(buffer, now: now)) }
        }

        @discardableResult
        mutating func respond(_ response: HTTP1Response = .json(200, #"{"ok":true}"#)) -> HTTP1Connection.Action {
            record(connection.respond(response, now: now))
        }

        @discardableResult
        mutating func readBody(limit: Int) -> HTTP1Connection.Action {
            record(connection.readBody(limit: limit, now: now))
        }

        @discardableResult
        mutating func writeFinished() -> HTTP1Connection.Action {
            record(connection.writeFinished(now: now))
        }

        @discardableResult
        mutating func peerClosed() -> HTTP1Connection.Action {
            record(connection.peerClosed(now: now))
        }

        /// Moves the clock to `instant` and tells the machine, as the shell's timer would.
        @discardableResult
        mutating func fire(at instant: Instant) -> HTTP1Connection.Action {
            now = instant
            return record(connection.deadlineReached(now: now))
        }

        /// What was written so far, as text, and forgets it.
        mutating func takeWritten() -> String {
            defer { written = [] }
            return String(decoding: written, as: UTF8.self)
        }
    }

    // MARK: Requests and answers

    @Test func getIsAnsweredAndTheConnectionKept() throws {
        var harness = Harness()
        #expect(harness.connection.current.isReading)
        #expect(harness.connection.current.deadline == harness.now + Self.timeout)
        let action = harness.receive("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        guard case .head(let head)? = action.handUp else {
            Issue.record("no head handed up")
            return
        }
        #expect(head.path == "/hello")
        // The handler's time has no deadline.
        #expect(action.deadline == nil)
        let answer = harness.respond(.json(200, #"{"hello":"world"}"#))
        #expect(answer.write != nil)
        #expect(answer.deadline == harness.now + Self.timeout)
        #expect(
            harness.takeWritten()
                == "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 17\r\n\r\n"
                + #"{"hello":"world"}"#)
        harness.now += Self.second
        let after = harness.writeFinished()
        #expect(!after.close)
        #expect(after.isReading)
        #expect(after.deadline == harness.now + Self.timeout)
    }

    /// A drain (the server shutting down): a connection idle after its requests closes at once; a request in
    /// progress is answered with `connection: close`, and the connection closes once that answer is written.
    @Test func aDrainClosesAnIdleConnectionNowAndABusyOneAfterItsAnswer() throws {
        var idle = Harness()
        idle.receive("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        idle.respond()
        #expect(!idle.writeFinished().close)
        #expect(idle.connection.drain(now: idle.now).close)

        var busy = Harness()
        busy.receive("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        let drained = busy.connection.drain(now: busy.now)
        #expect(!drained.close)
        #expect(busy.respond().write != nil)
        #expect(busy.takeWritten().contains("\r\nconnection: close\r\n"))
        #expect(busy.writeFinished().close)
    }

    @Test func bodyIsReadToItsLimitAndHandedUpWithTheHead() throws {
        var harness = Harness()
        harness.receive("POST /v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhel")
        let waiting = harness.readBody(limit: 8)
        #expect(waiting.handUp == nil)
        #expect(waiting.isReading)
        let action = harness.receive("lo")
        guard case .request(let head, let body)? = action.handUp else {
            Issue.record("no request handed up")
            return
        }
        #expect(head.path == "/v1/push")
        #expect(body == Array("hello".utf8))
        #expect(harness.respond().write != nil)
        #expect(harness.takeWritten().hasPrefix("HTTP/1.1 200 OK\r\n"))
    }

    @Test func aDecisionThatComesLaterHoldsTheConnection() {
        var harness = Harness()
        let first = harness.receive("POST /later HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok")
        #expect(first.handUp != nil)
        // More bytes while the handler decides: buffered, nothing handed up or answered.
        let more = harness.receive("GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(more.handUp == nil)
        #expect(more.write == nil)
        harness.now += 60 * Self.second
        #expect(harness.fire(at: harness.now).close == false)
        guard case .request(_, let body)? = harness.readBody(limit: 64).handUp else {
            Issue.record("no request")
            return
        }
        #expect(body == Array("ok".utf8))
        harness.respond()
        guard case .head(let next)? = harness.writeFinished().handUp else {
            Issue.record("the pipelined request did not follow")
            return
        }
        #expect(next.path == "/next")
    }

    @Test func aSecondAnswerIsIgnored() {
        var harness = Harness()
        harness.receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(harness.respond().write != nil)
        let second = harness.respond(.json(500, "{}"))
        #expect(second.write == nil)
        #expect(harness.takeWritten().contains("200 OK"))
    }

    @Test func headRequestsGetTheLengthWithoutTheBody() {
        var harness = Harness()
        harness.receive("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        harness.respond(.json(200, #"{"status":"ok"}"#))
        let text = harness.takeWritten()
        #expect(text.hasSuffix("content-length: 15\r\n\r\n"))
    }

    @Test func responseFramingFieldsAreTheConnectionsOwn() {
        let response = HTTP1Response(
            status: 200,
            headers: [
                .init(name: "Content-Length", value: "99"), .init(name: "Connection", value: "keep-alive"),
                .init(name: "x-bad", value: "a\r\nInjected: yes"), .init(name: "bad name", value: "v"),
                .init(name: "retry-after", value: "1"),
            ], body: Array("{}".utf8))
        let text = String(decoding: response.serialized(close: true), as: UTF8.self)
        #expect(text == "HTTP/1.1 200 OK\r\nretry-after: 1\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
    }

    /// The status code and `content-length` are written as decimal numbers at every size (0, one digit, powers of
    /// ten and the numbers just below them), and an out-of-range status as 500.
    @Test func statusAndContentLengthAreWrittenInDecimal() {
        for length in [0, 1, 9, 10, 99, 100, 999, 1_000, 4_096, 65_536, 1_000_000] {
            let response = HTTP1Response(status: 204, body: Array(repeating: UInt8(ascii: "x"), count: length))
            let text = String(decoding: response.serialized(close: false, headRequest: true), as: UTF8.self)
            #expect(text == "HTTP/1.1 204 No Content\r\ncontent-length: \(length)\r\n\r\n")
        }
        for (status, line) in [
            (100, "100 Continue"), (999, "999 Status"), (1_000, "500 Internal Server Error"),
            (42, "500 Internal Server Error"),
        ] {
            let text = String(decoding: HTTP1Response(status: status).serialized(close: true), as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 \(line)\r\n"))
        }
    }

    @Test func expectContinueGetsItsInterimAnswerWhenTheBodyIsWanted() {
        var harness = Harness()
        harness.receive("POST /v1/push HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        let action = harness.readBody(limit: 64)
        #expect(harness.takeWritten() == "HTTP/1.1 100 Continue\r\n\r\n")
        #expect(action.isReading)
        harness.writeFinished()
        guard case .request? = harness.receive("ok").handUp else {
            Issue.record("no request")
            return
        }
        #expect(harness.respond().write != nil)
    }

    /// The interim answer does not depend on whether the body came in the head's read: it is written either way,
    /// with the request handed up in the same action when its body is already in.
    @Test func expectContinueIsAnsweredAlikeWhateverTheReadsHold() {
        var harness = Harness()
        harness.receive("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok")
        let action = harness.readBody(limit: 64)
        #expect(action.write == Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
        guard case .request(_, let body)? = action.handUp else {
            Issue.record("no request with the interim answer")
            return
        }
        #expect(body == Array("ok".utf8))
    }

    // MARK: Keep-alive

    @Test func connectionCloseIsHonoured() {
        var harness = Harness()
        harness.receive("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        harness.respond()
        #expect(harness.takeWritten().contains("\r\nconnection: close\r\n"))
        #expect(harness.writeFinished().close)
    }

    @Test func http10ClosesUnlessKeepAliveIsAsked() {
        var plain = Harness()
        plain.receive("GET / HTTP/1.0\r\n\r\n")
        plain.respond()
        #expect(plain.takeWritten().contains("\r\nconnection: close\r\n"))
        #expect(plain.writeFinished().close)

        var kept = Harness()
        kept.receive("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        kept.respond()
        #expect(kept.takeWritten().contains("\r\nconnection: keep-alive\r\n"))
        let after = kept.writeFinished()
        #expect(!after.close)
        #expect(after.isReading)
        #expect(kept.receive("GET /again HTTP/1.0\r\n\r\n").handUp != nil)
    }

    // MARK: Pipelining and half-close

    @Test func pipelinedRequestsAreAnsweredInOrder() {
        var harness = Harness()
        let first = harness.receive(
            "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nPOST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx"
                + "GET /3 HTTP/1.1\r\nHost: x\r\n\r\n")
        var paths: [String] = []
        if case .head(let head)? = first.handUp { paths.append(head.path) }
        harness.respond(.json(200, "1"))
        var next = harness.writeFinished()
        if case .head(let head)? = next.handUp { paths.append(head.path) }
        next = harness.readBody(limit: 8)
        if case .request(let head, _)? = next.handUp { paths.append(head.path) }
        harness.respond(.json(200, "2"))
        next = harness.writeFinished()
        if case .head(let head)? = next.handUp { paths.append(head.path) }
        harness.respond(.json(200, "3"))
        harness.writeFinished()
        #expect(paths == ["/1", "/2", "/2", "/3"])
        let bodies = harness.takeWritten().split(separator: "HTTP/1.1 200 OK").map { $0.suffix(1) }
        #expect(bodies == ["1", "2", "3"])
    }

    @Test func pipelinedBytesAreBoundedWhileTheHandlerWorks() {
        var harness = Harness { $0.maxBufferedBytes = 100 }
        harness.receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        let small = harness.receive(String(repeating: "G", count: 50))
        #expect(small.isReading)
        let full = harness.receive(String(repeating: "G", count: 60))
        #expect(!full.isReading)
    }

    @Test func aHalfClosedClientStillGetsItsAnswers() {
        var harness = Harness()
        harness.receive("GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n")
        let closed = harness.peerClosed()
        #expect(!closed.close)
        #expect(!closed.isReading)
        harness.respond()
        #expect(harness.writeFinished().handUp != nil)
        harness.respond()
        #expect(harness.takeWritten().split(separator: "200 OK").count == 3)
        #expect(harness.writeFinished().close)
    }

    @Test func aRequestCutShortByTheClientClosesTheConnection() {
        var harness = Harness()
        harness.receive("GET / HTTP/1.1\r\nHost:")
        #expect(harness.peerClosed().close)

        var body = Harness()
        body.receive("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab")
        body.readBody(limit: 8)
        #expect(body.peerClosed().close)

        var idle = Harness()
        #expect(idle.peerClosed().close)
    }

    @Test func aConnectionClosedByItsClientLingersOverBytesNotRead() {
        var harness = Harness()
        harness.receive("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /more HTTP/1.1\r\n")
        harness.respond()
        let after = harness.writeFinished()
        #expect(after.shutdownWrite)
        #expect(!after.close)
        #expect(after.handUp == nil)
    }

    // MARK: Draining

    @Test func drainingAnswersTheRequestInProgressThenCloses() {
        var harness = Harness()
        harness.receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(!harness.connection.drain(now: harness.now).close)
        harness.respond()
        #expect(harness.takeWritten().contains("\r\nconnection: close\r\n"))
        #expect(harness.writeFinished().close)

        var idle = Harness()
        idle.receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        idle.respond()
        idle.writeFinished()
        #expect(idle.connection.drain(now: idle.now).close)
    }

    /// A request on its way when the server stops (a new connection's first, which its client sent as the connection
    /// was accepted, or a head partly in) has a second for its head, and is answered with `connection: close`; a head
    /// that does not come in that second ends the connection.
    @Test func drainingGivesARequestOnItsWayASecondForItsHead() throws {
        var partial = Harness()
        partial.receive("GET / HT")
        let drained = partial.connection.drain(now: partial.now)
        #expect(!drained.close)
        #expect(drained.deadline == partial.now + Self.second)
        guard case .head? = partial.receive("TP/1.1\r\nHost: x\r\n\r\n").handUp else {
            Issue.record("the head was not handed up")
            return
        }
        partial.respond()
        #expect(partial.takeWritten().contains("\r\nconnection: close\r\n"))
        #expect(partial.writeFinished().close)

        var fresh = Harness()
        let waiting = fresh.connection.drain(now: fresh.now)
        #expect(!waiting.close)
        #expect(waiting.isReading)
        #expect(waiting.deadline == fresh.now + Self.second)
        fresh.now = fresh.now + Self.second / 2
        // The head's deadline stays the drain's: its first byte does not restart it.
        #expect(fresh.receive("GET / HTTP/1.1\r\n").deadline == waiting.deadline)
        #expect(fresh.fire(at: try #require(waiting.deadline)).close)
        #expect(fresh.takeWritten().isEmpty)
    }

    // MARK: Deadlines

    @Test func aSilentConnectionIsClosedAtTheIdleDeadline() {
        var harness = Harness()
        let due = harness.now + Self.timeout
        // Early or stale timers change nothing.
        #expect(!harness.fire(at: due - 1).close)
        #expect(harness.fire(at: due).close)
        #expect(harness.connection.isClosed)
    }

    @Test func aTrickledHeadIsCutOffAtItsDeadline() {
        var harness = Harness()
        let start = harness.now + Self.second
        harness.now = start
        var action = harness.receive("G")
        #expect(action.deadline == start + Self.timeout)
        // A byte a second: progress never moves the deadline.
        for byte in "ET / HTTP/1.1\r\n".utf8 {
            harness.now += Self.second / 2
            action = harness.record(harness.connection.received([byte], now: harness.now))
            #expect(action.deadline == start + Self.timeout)
        }
        #expect(harness.fire(at: start + Self.timeout).close)
    }

    @Test func aTrickledBodyIsCutOffAtItsDeadline() {
        var harness = Harness()
        harness.receive("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        harness.now += Self.second
        let bodyStart = harness.now
        #expect(harness.readBody(limit: 1000).deadline == bodyStart + Self.timeout)
        for _ in 0..<15 {
            harness.now += Self.second / 2
            #expect(harness.receive("x").deadline == bodyStart + Self.timeout)
        }
        #expect(harness.fire(at: bodyStart + Self.timeout).close)
    }

    @Test func anIdleKeptAliveConnectionIsClosedAtItsDeadline() {
        var harness = Harness()
        harness.receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        harness.respond()
        harness.now += Self.second
        let written = harness.now
        #expect(harness.writeFinished().deadline == written + Self.timeout)
        #expect(!harness.fire(at: written + Self.timeout - 1).close)
        #expect(harness.fire(at: written + Self.timeout).close)
    }

    @Test func aClientThatDoesNotReadItsAnswerIsCutOff() {
        var harness = Harness()
        harness.receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        harness.now += 3 * Self.second
        let answered = harness.now
        let action = harness.respond()
        #expect(action.write != nil)
        #expect(action.deadline == answered + Self.timeout)
        // Bytes the client sends meanwhile do not help.
        harness.now += Self.second
        #expect(harness.receive("GET /").deadline == answered + Self.timeout)
        #expect(harness.fire(at: answered + Self.timeout).close)
    }

    @Test func aPipelinedHeadsDeadlineStartsWhenItsTurnComes() {
        var harness = Harness()
        harness.receive("GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HT")
        harness.now += 20 * Self.second
        harness.respond()
        harness.now += Self.second
        let turn = harness.now
        let action = harness.writeFinished()
        #expect(action.handUp == nil)
        #expect(action.deadline == turn + Self.timeout)
    }

    // MARK: Refusals

    @Test func declaredLengthOverTheLimitIsAnswered413AtOnceThenLingers() {
        var harness = Harness()
        // The handler has the head already: the refusal follows it.
        let first = harness.receive("POST /v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
        guard case .head? = first.handUp else {
            Issue.record("no head handed up")
            return
        }
        let action = harness.readBody(limit: 64)
        guard case .bodyTooLarge(let head, let error)? = action.handUp else {
            Issue.record("not refused as too large")
            return
        }
        #expect(error.status == 413)
        #expect(head.path == "/v1/push")
        harness.respond(.json(413, #"{"error":"too_large"}"#))
        let text = harness.takeWritten()
        #expect(text.hasPrefix("HTTP/1.1 413 Content Too Large\r\n"))
        #expect(text.contains("\r\nconnection: close\r\n"))
        harness.now += Self.second
        let lingerStart = harness.now
        let written = harness.writeFinished()
        #expect(written.shutdownWrite)
        #expect(!written.close)
        #expect(written.isReading)
        #expect(written.deadline == lingerStart + 2 * Self.second)
        // What the client still sends is read and dropped, until the linger ends.
        let dropped = harness.receive(String(repeating: "x", count: 5000))
        #expect(dropped.handUp == nil && dropped.write == nil && !dropped.close)
        #expect(harness.fire(at: lingerStart + 2 * Self.second).close)
    }

    /// A body announced with `Expect: 100-continue` over the limit gets its refusal, never the interim answer.
    @Test func expectContinueOverTheLimitGetsTheRefusalInsteadOfContinue() {
        var harness = Harness()
        harness.receive("POST /v1/push HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 65\r\n\r\n")
        let action = harness.readBody(limit: 64)
        guard case .bodyTooLarge(_, let error)? = action.handUp else {
            Issue.record("not refused as too large")
            return
        }
        #expect(error.status == 413)
        harness.respond(.json(413, #"{"error":"too_large"}"#))
        let text = harness.takeWritten()
        #expect(text.hasPrefix("HTTP/1.1 413 Content Too Large\r\n"))
        #expect(!text.contains("100 Continue"))
        #expect(harness.writeFinished().shutdownWrite)
    }

    /// A head over its limits (more than a hundred field lines) is answered 431, and a request pipelined after it is
    /// never served: the connection lingers, then closes.
    @Test func aHeadOverItsLimitsIsAnswered431ThenLingers() {
        var harness = Harness()
        let lines = (0..<1000).map { "X-\($0): a\r\n" }.joined()
        let action = harness.receive(
            "GET /v1/grant HTTP/1.1\r\nHost: x\r\n" + lines + "\r\nGET /v1/smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
        guard case .refused(let head, let error, _)? = action.handUp else {
            Issue.record("not refused")
            return
        }
        #expect(error.status == 431)
        #expect(head.path == "/v1/grant")
        harness.respond(.refusal(error))
        #expect(harness.takeWritten().hasSuffix("connection: close\r\n\r\n{\"error\":\"too_large\"}"))
        let after = harness.writeFinished()
        #expect(after.shutdownWrite)
        #expect(after.handUp == nil)
        #expect(harness.receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n").handUp == nil)
    }

    @Test func lingeringEndsWhenTheClientCloses() {
        var harness = Harness()
        harness.receive("GET / HTTP/1.1\r\n\r\n")
        harness.respond(.json(400, #"{"error":"bad_request"}"#))
        #expect(harness.writeFinished().shutdownWrite)
        #expect(harness.peerClosed().close)
    }

    @Test func chunkedBodyGrowingPastTheLimitIsRefused() {
        var harness = Harness()
        // The handler has the head already: the refusal follows it.
        let head = harness.receive("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        guard case .head? = head.handUp else {
            Issue.record("no head handed up")
            return
        }
        harness.readBody(limit: 64)
        let chunk = String(repeating: "z", count: 40)
        let action = harness.receive("28\r\n\(chunk)\r\n28\r\n")
        guard case .bodyTooLarge(_, let error)? = action.handUp else {
            Issue.record("not refused as too large")
            return
        }
        #expect(error.code == .bodyTooLarge)
    }

    @Test(arguments: [
        "GET / HTTP/1.1\r\nHost: x\r\nContent-Length : 0\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n", "GET /\u{0} HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
    ])
    func framingErrorsAreAnsweredThenLinger(request: String) {
        var harness = Harness()
        // A request pipelined after the bad one is never served.
        let action = harness.receive(request + "GET /v1/smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
        guard case .refused(_, let error, let followsHead)? = action.handUp else {
            Issue.record("not refused")
            return
        }
        #expect(error.status == 400)
        #expect(!followsHead)
        harness.respond(.refusal(error))
        #expect(harness.takeWritten().hasSuffix("connection: close\r\n\r\n{\"error\":\"bad_request\"}"))
        let after = harness.writeFinished()
        #expect(after.shutdownWrite)
        #expect(after.handUp == nil)
    }

    @Test func aTargetOverItsLimitIsRefusedBeforeTheLineEnds() {
        var harness = Harness { $0.limits = HTTP1RequestParser.Limits(maxTargetBytes: 16) }
        let action = harness.receive("GET /v1/" + String(repeating: "a", count: 40))
        guard case .refused(let head, let error, let followsHead)? = action.handUp else {
            Issue.record("not refused")
            return
        }
        #expect(error.status == 414)
        #expect(head.path.hasPrefix("/v1/"))
        #expect(!followsHead)
    }

    // MARK: Answers from the head

    @Test func answerFromTheHeadDropsASmallBodyAndKeepsTheConnection() {
        var harness = Harness()
        harness.receive("POST /missing HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhe")
        let waiting = harness.respond(.json(404, #"{"error":"not_found"}"#))
        #expect(waiting.write == nil)
        harness.receive("llo")
        #expect(harness.takeWritten().hasPrefix("HTTP/1.1 404 Not Found\r\n"))
        let after = harness.writeFinished()
        #expect(!after.close && !after.shutdownWrite)
        #expect(harness.receive("GET / HTTP/1.1\r\nHost: x\r\n\r\n").handUp != nil)
    }

    @Test(arguments: [
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
    ])
    func answerFromTheHeadToABodyNotWorthReadingCloses(request: String) {
        var harness = Harness()
        harness.receive(request)
        #expect(harness.respond(.json(404, "{}")).write != nil)
        #expect(harness.takeWritten().contains("connection: close"))
        #expect(harness.writeFinished().shutdownWrite)
    }
}
