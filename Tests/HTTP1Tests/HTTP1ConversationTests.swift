import HTTP1
import MonotonicTime
import RelayTestSupport
import Testing

/// The conversation between a server connection and its handler, driven alone with a test clock: inputs that come
/// while an action is carried out wait for it, a head decision may come later (and a second `later` is a 500), and a
/// body over the handler's limit is its own hand-up.
@Suite("HTTP/1.1 conversation with the handler")
struct HTTP1ConversationTests {
    static let second: UInt64 = 1_000_000_000
    static let start = Instant(nanoseconds: 5 * second)

    static func conversation() -> HTTP1Conversation {
        HTTP1Conversation(configuration: HTTP1Connection.Configuration(timeout: 10 * second), now: start)
    }

    static func receive(_ text: String, _ conversation: inout HTTP1Conversation) -> HTTP1Connection.Action? {
        Array(text.utf8).withUnsafeBytes { conversation.received($0, now: start) }
    }

    /// The action, required (a mutating call cannot stand inside `#require`).
    static func must(_ action: HTTP1Connection.Action?) throws -> HTTP1Connection.Action {
        try #require(action)
    }

    static func text(_ action: HTTP1Connection.Action?) -> String {
        String(decoding: action?.write ?? [], as: UTF8.self)
    }

    // MARK: Inputs wait for the action in hand

    @Test func anAnswerGivenInsideTheHandlersCallIsCarriedOutOnceTheActionIsDone() throws {
        var conversation = Self.conversation()
        let first = conversation.start(draining: false, now: Self.start)
        #expect(first.isReading && first.deadline == Self.start + 10 * Self.second)
        #expect(conversation.next(now: Self.start) == nil)

        let asked = try Self.must(Self.receive("GET /a HTTP/1.1\r\nHost: x\r\n\r\n", &conversation))
        guard case .head(let head)? = asked.handUp else {
            Issue.record("no head asked about")
            return
        }
        #expect(head.path == "/a")
        // Inside the handler's call: nothing is carried out before the asking action is done.
        #expect(conversation.decide(.respond(.json(200, "{}")), now: Self.start) == nil)
        #expect(Self.receive("GET /b HTTP/1.1\r\nHost: x\r\n\r\n", &conversation) == nil)
        let answered = try Self.must(conversation.next(now: Self.start))
        #expect(Self.text(answered).hasPrefix("HTTP/1.1 200 OK\r\n"))
        // A write done at once is an input like the others.
        #expect(conversation.writeFinished(now: Self.start) == nil)
        // The bytes, then the write's end, in the order they came: the next head once the answer is out.
        let buffered = try Self.must(conversation.next(now: Self.start))
        #expect(buffered.handUp == nil)
        let next = try Self.must(conversation.next(now: Self.start))
        guard case .head(let second)? = next.handUp else {
            Issue.record("the pipelined head was not asked about after the write")
            return
        }
        #expect(second.path == "/b")
    }

    @Test func aWriteThatFinishesLaterIsTakenAtOnce() throws {
        var conversation = Self.conversation()
        _ = conversation.start(draining: false, now: Self.start)
        _ = conversation.next(now: Self.start)
        _ = Self.receive("GET /a HTTP/1.1\r\nHost: x\r\n\r\n", &conversation)
        _ = conversation.decide(.respond(.json(204, "")), now: Self.start)
        #expect(Self.text(conversation.next(now: Self.start)).hasPrefix("HTTP/1.1 204"))
        #expect(conversation.next(now: Self.start) == nil)
        let after = try Self.must(conversation.writeFinished(now: Self.start))
        #expect(after.isReading && after.write == nil && !after.close)
    }

    @Test func aDrainWhileTheHandlerIsAskedClosesAfterItsAnswer() throws {
        var conversation = Self.conversation()
        _ = conversation.start(draining: false, now: Self.start)
        _ = conversation.next(now: Self.start)
        _ = Self.receive("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", &conversation)
        _ = conversation.decide(.readBody(limit: 10), now: Self.start)
        let request = try Self.must(conversation.next(now: Self.start))
        guard case .request(_, let body)? = request.handUp else {
            Issue.record("the request was not handed over")
            return
        }
        #expect(body == Array("hi".utf8))
        #expect(conversation.drain(now: Self.start) == nil)
        #expect(conversation.respond(.json(200, "{}"), now: Self.start) == nil)
        var written = ""
        var closed = false
        var next = conversation.next(now: Self.start)
        for _ in 0..<4 {
            guard let action = next else { break }
            written += Self.text(action)
            closed = closed || action.close
            next = action.write != nil ? conversation.writeFinished(now: Self.start) : nil
            next = next ?? conversation.next(now: Self.start)
        }
        #expect(written.contains("connection: close\r\n"))
        #expect(closed)
    }

    /// A connection accepted while the server stops: its client sent its request to a server that accepted it, so
    /// it has a second for its head (then its answer closes it), not a close at once.
    @Test func aConnectionAcceptedWhileTheServerStopsHasASecondForItsRequest() {
        var conversation = Self.conversation()
        let started = conversation.start(draining: true, now: Self.start)
        #expect(!started.close)
        #expect(started.deadline == Self.start + 1_000_000_000)
    }

    // MARK: Head decisions that come later

    @Test func aDecisionThatComesLaterIsTakenAndAnotherIsIgnored() throws {
        var conversation = Self.conversation()
        _ = conversation.start(draining: false, now: Self.start)
        _ = conversation.next(now: Self.start)
        _ = Self.receive("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", &conversation)
        #expect(conversation.decide(.later, now: Self.start) == nil)
        // Nothing to carry out while the decision is awaited; the connection reads on (up to its buffer's limit).
        #expect(conversation.next(now: Self.start) == nil)
        #expect(conversation.awaitingDecision)
        let request = try Self.must(conversation.decidedLater(.readBody(limit: 10), now: Self.start))
        guard case .request(_, let body)? = request.handUp else {
            Issue.record("the body was not read after the decision")
            return
        }
        #expect(body == Array("hi".utf8))
        #expect(!conversation.awaitingDecision)
        #expect(conversation.next(now: Self.start) == nil)
        #expect(conversation.decidedLater(.respond(.json(403, "{}")), now: Self.start) == nil)
        #expect(Self.text(conversation.respond(.json(200, "{}"), now: Self.start)).hasPrefix("HTTP/1.1 200"))
    }

    @Test func aDecisionMadeBeforeTheWaitBeganIsTakenOnceTheActionIsDone() throws {
        var conversation = Self.conversation()
        _ = conversation.start(draining: false, now: Self.start)
        _ = conversation.next(now: Self.start)
        _ = Self.receive("GET /a HTTP/1.1\r\nHost: x\r\n\r\n", &conversation)
        #expect(conversation.decide(.later, now: Self.start) == nil)
        #expect(conversation.decidedLater(.respond(.json(429, "{}")), now: Self.start) == nil)
        #expect(Self.text(conversation.next(now: Self.start)).hasPrefix("HTTP/1.1 429"))
    }

    @Test func aDecisionLaterAgainIsAnsweredAsAnInternalError() throws {
        var conversation = Self.conversation()
        _ = conversation.start(draining: false, now: Self.start)
        _ = conversation.next(now: Self.start)
        _ = Self.receive("GET /a HTTP/1.1\r\nHost: x\r\n\r\n", &conversation)
        _ = conversation.decide(.later, now: Self.start)
        _ = conversation.next(now: Self.start)
        let answer = try Self.must(conversation.decidedLater(.later, now: Self.start))
        #expect(Self.text(answer).hasPrefix("HTTP/1.1 500 Internal Server Error\r\n"))
        #expect(HTTP1Conversation.laterAgain.status == 500)
    }

    // MARK: Which hand-up a refusal is

    @Test func aDeclaredBodyOverTheLimitIsBodyTooLarge() throws {
        var conversation = Self.conversation()
        _ = conversation.start(draining: false, now: Self.start)
        _ = conversation.next(now: Self.start)
        _ = Self.receive("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n", &conversation)
        _ = conversation.decide(.readBody(limit: 10), now: Self.start)
        let asked = try Self.must(conversation.next(now: Self.start))
        guard case .bodyTooLarge(let head, _)? = asked.handUp else {
            Issue.record("not asked for the body-too-large answer: \(String(describing: asked.handUp))")
            return
        }
        #expect(head.path == "/a")
    }

    @Test func aChunkedBodyGrownPastTheLimitIsBodyTooLarge() throws {
        var conversation = Self.conversation()
        _ = conversation.start(draining: false, now: Self.start)
        _ = conversation.next(now: Self.start)
        _ = Self.receive("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", &conversation)
        _ = conversation.decide(.readBody(limit: 4), now: Self.start)
        #expect(try Self.must(conversation.next(now: Self.start)).isReading)
        #expect(conversation.next(now: Self.start) == nil)
        let asked = try Self.must(Self.receive("8\r\n12345678\r\n0\r\n\r\n", &conversation))
        guard case .bodyTooLarge? = asked.handUp else {
            Issue.record("not asked for the body-too-large answer: \(String(describing: asked.handUp))")
            return
        }
        _ = conversation.next(now: Self.start)
        let answer = try Self.must(conversation.respond(.json(413, "{}"), now: Self.start))
        #expect(Self.text(answer).hasPrefix("HTTP/1.1 413"))
    }

    @Test func otherRefusalsAreRefusedWithTheirRule() throws {
        var conversation = Self.conversation()
        _ = conversation.start(draining: false, now: Self.start)
        _ = conversation.next(now: Self.start)
        let asked = try Self.must(
            Self.receive("GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 2\r\n\r\n", &conversation))
        guard case .refused(_, let error, let followsHead)? = asked.handUp else {
            Issue.record("not refused: \(String(describing: asked.handUp))")
            return
        }
        #expect(error.status == 400 && !followsHead)

        var chunked = Self.conversation()
        _ = chunked.start(draining: false, now: Self.start)
        _ = chunked.next(now: Self.start)
        _ = Self.receive("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", &chunked)
        _ = chunked.decide(.readBody(limit: 100), now: Self.start)
        let refusedBody = try Self.must(chunked.next(now: Self.start))
        guard case .refused(_, let bodyError, let afterHead)? = refusedBody.handUp else {
            Issue.record("the chunked body was not refused: \(String(describing: refusedBody.handUp))")
            return
        }
        #expect(bodyError.status == 400 && afterHead)
    }

    // MARK: Any order of answers and writes

    /// A shell over the conversation whose handler answers inside its call or later, and whose socket writes at once
    /// or later, as a generator says.
    struct Shell {
        var conversation = HTTP1Conversation(
            configuration: HTTP1Connection.Configuration(discardableBodyBytes: 8), now: 0)
        var random: SplitMix64
        var written: [UInt8] = []
        var closed = false
        var asked = 0
        /// Inputs the shell gives later, at the top (not inside an action).
        var later: [Later] = []

        enum Later {
            case writeFinished
            case respond(HTTP1Response)
            case decided(HTTP1Conversation.Decision)
        }

        init(seed: UInt64) { random = SplitMix64(seed: seed) }

        mutating func run(_ first: HTTP1Connection.Action?) {
            var next = first
            var steps = 0
            while let action = next, !closed, steps < 1000 {
                steps += 1
                carry(action)
                next = closed ? nil : conversation.next(now: 0)
            }
        }

        mutating func carry(_ action: HTTP1Connection.Action) {
            if action.close {
                closed = true
                return
            }
            if let bytes = action.write {
                written += bytes
                if Bool.random(using: &random) {
                    #expect(conversation.writeFinished(now: 0) == nil)
                } else {
                    later.append(.writeFinished)
                }
            }
            guard let question = action.handUp else { return }
            asked += 1
            let now = Bool.random(using: &random)
            switch question {
            case .head(let head):
                switch head.path {
                case "/from-head": #expect(conversation.decide(.respond(.json(404, "{}")), now: 0) == nil)
                case "/later":
                    #expect(conversation.decide(.later, now: 0) == nil)
                    if now {
                        #expect(conversation.decidedLater(.readBody(limit: 16), now: 0) == nil)
                    } else {
                        later.append(.decided(.readBody(limit: 16)))
                    }
                default: #expect(conversation.decide(.readBody(limit: 16), now: 0) == nil)
                }
            case .request(let head, let body):
                answer(HTTP1Response(status: 200, body: Array(head.path.utf8) + body), now: now)
            case .bodyTooLarge:
                answer(.json(413, "{}"), now: now)
            case .refused(_, let error, _):
                answer(.refusal(error), now: now)
            case .admission:
                Issue.record("a connection within the caps asked for room")
            }
        }

        mutating func answer(_ response: HTTP1Response, now: Bool) {
            if now {
                #expect(conversation.respond(response, now: 0) == nil)
            } else {
                later.append(.respond(response))
            }
        }

        /// Gives the inputs kept for later, one at a time, in an order the generator picks.
        mutating func settle() {
            var rounds = 0
            while !later.isEmpty, !closed, rounds < 1000 {
                rounds += 1
                let input = later.remove(at: Int.random(in: 0..<later.count, using: &random))
                switch input {
                case .writeFinished: run(conversation.writeFinished(now: 0))
                case .respond(let response): run(conversation.respond(response, now: 0))
                case .decided(let decision): run(conversation.decidedLater(decision, now: 0))
                }
            }
        }

        mutating func serve(_ stream: String) {
            run(conversation.start(draining: false, now: 0))
            let bytes = Array(stream.utf8)
            var offset = 0
            while offset < bytes.count, !closed {
                let end = min(bytes.count, offset + Int.random(in: 1...64, using: &random))
                run(bytes[offset..<end].withUnsafeBytes { conversation.received($0, now: 0) })
                offset = end
                if Bool.random(using: &random) { settle() }
            }
            settle()
        }
    }

    static let streams = [
        "GET /from-head HTTP/1.1\r\nHost: x\r\n\r\nPOST /later HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
            + "POST /3 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi"
            + "GET /4 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
            + "POST /5 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            + "POST /from-head HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcdGET /later HTTP/1.1\r\nHost: x\r\n\r\n"
            + "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n",
        "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\nContent-Length : 1\r\n\r\nx",
        "POST /later HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n"
            + String(repeating: "c", count: 32),
    ]

    @Test(arguments: streams)
    func theSameBytesAreWrittenWhateverAnswersAndWritesComeInsideAnActionOrLater(stream: String) {
        var reference = Shell(seed: 0)
        reference.serve(stream)
        #expect(reference.asked >= 2)
        #expect(reference.later.isEmpty)
        for seed in 1...200 as ClosedRange<UInt64> {
            var shell = Shell(seed: seed)
            shell.serve(stream)
            #expect(shell.written == reference.written, "seed \(seed)")
            #expect(shell.closed == reference.closed, "seed \(seed)")
            #expect(shell.asked == reference.asked, "seed \(seed)")
        }
    }
}

extension HTTP1Conversation {
    /// As the shell asks once it has carried out an action: the next action, or nil.
    mutating func next(now: Instant) -> HTTP1Connection.Action? {
        var action = connection.current
        return actionDone(&action, now: now) ? action : nil
    }
}
