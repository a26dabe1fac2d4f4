import MonotonicTime
import Testing

@testable import RedisClient

/// The pipeline's logic alone, with a test clock (nanoseconds given with each input) and no server: set-up,
/// batching, deadlines, matching, NOSCRIPT, reconnection pacing and the events for the log.
@Suite struct RedisPipelineMachineTests {
    typealias Machine = RedisPipelineMachine<Int>

    static let ms: UInt64 = 1_000_000
    /// The test clock's origin.
    static let t0: Instant = 0
    static let digest = Array("0123456789abcdef0123456789abcdef01234567".utf8)
    static let auth = Array("AUTH-BYTES;".utf8)
    static let select = Array("SELECT-BYTES;".utf8)
    static let scriptLoad = Array("SCRIPT-LOAD-BYTES;".utf8)

    static func machine(
        password: Bool = true, timeout: UInt64 = 100 * ms, seed: UInt64 = 7, maximumBatch: Int = 32
    ) -> Machine {
        var setUp: [Machine.SetUpCommand] = []
        if password { setUp.append(.init(kind: .auth, bytes: auth)) }
        setUp.append(.init(kind: .select, bytes: select))
        setUp.append(.init(kind: .scriptLoad, bytes: scriptLoad))
        var configuration = Machine.Configuration(
            timeout: timeout, connectTimeout: 2_000 * ms, setUp: setUp, scriptLoad: scriptLoad, scriptDigest: digest)
        configuration.maximumBatch = maximumBatch
        return Machine(configuration: configuration, seed: seed)
    }

    /// The set-up replies, in order.
    static let setUpReplies: [RedisPipelineReply] = [
        .other(.status("OK")), .other(.status("OK")), .other(.bulk(digest)),
    ]

    /// A machine connected and set up at `now`.
    static func ready(at now: Instant = 0, timeout: UInt64 = 100 * ms, maximumBatch: Int = 32) -> Machine {
        var machine = machine(timeout: timeout, maximumBatch: maximumBatch)
        _ = machine.start(now: now)
        machine.connected(now: now)
        _ = written(&machine)
        for reply in setUpReplies { _ = machine.received(reply, now: now) }
        return machine
    }

    /// Queues request `id`.
    @discardableResult
    static func submit(_ machine: inout Machine, _ id: Int, at now: Instant) -> Machine.SubmitResult {
        machine.submit(id, now: now)
    }

    /// Queues request `id` and writes it, a call alone; returns the call's tag.
    @discardableResult
    static func send(_ machine: inout Machine, _ id: Int, at now: Instant) -> UInt64 {
        submit(&machine, id, at: now)
        var tags: [UInt64] = []
        _ = written(&machine, tags: &tags)
        return tags.last ?? 0
    }

    /// What a flush writes: each call as `EVALSHA-<tag>:<requests>;`. `joins` says whether a request may join the
    /// first of a call (by default none does: each request is a call alone).
    static func written(
        _ machine: inout Machine, joins: (Int, Int) -> Bool = { _, _ in false }
    ) -> String {
        var tags: [UInt64] = []
        return written(&machine, joins: joins, tags: &tags)
    }

    static func written(
        _ machine: inout Machine, joins: (Int, Int) -> Bool = { _, _ in false }, tags: inout [UInt64]
    ) -> String {
        var text = ""
        var calls: [UInt64] = []
        machine.flush(
            format: { requests, tag in
                calls.append(tag)
                let first = requests[requests.startIndex]
                let taken = 1 + requests.dropFirst().prefix { joins(first, $0) }.count
                let ids = requests.prefix(taken).map(String.init).joined(separator: ",")
                return (Array("EVALSHA-\(tag):\(ids);".utf8), taken)
            },
            write: { text += String(decoding: $0, as: UTF8.self) })
        tags = calls
        return text
    }

    /// The answer of a call of one request.
    static func answered(_ result: Machine.ReplyResult) -> (Int, Result<RedisScriptAnswer, RedisClientError>)? {
        guard case .answers(let answers, _) = result, answers.count == 1 else { return nil }
        return (answers[0].request, answers[0].result)
    }

    static func one(_ answer: RedisScriptAnswer) -> [RedisScriptAnswer] { [answer] }

    static func loss(_ result: Machine.ReplyResult) -> Machine.Loss? {
        if case .lost(let loss) = result { return loss }
        return nil
    }

    static func loss(_ result: Machine.TimerResult) -> Machine.Loss? {
        if case .lost(let loss) = result { return loss }
        return nil
    }

    // MARK: Set-up

    @Test func theSetUpGoesOutInOneWriteAndRequestsAreRefusedUntilItsRepliesAreIn() {
        var machine = Self.machine()
        #expect(Self.submit(&machine, 1, at: 0) == .refused)
        let started = machine.start(now: 0)
        let again = machine.start(now: 0)
        #expect(started)
        #expect(!again, "one attempt at a time")
        #expect(machine.nextDeadline == Self.t0 + 2_000 * Self.ms, "the connect timeout runs")
        machine.connected(now: Self.t0 + 1 * Self.ms)
        #expect(Self.written(&machine) == "AUTH-BYTES;SELECT-BYTES;SCRIPT-LOAD-BYTES;")
        #expect(Self.submit(&machine, 1, at: 0) == .refused)
        guard case .none = machine.received(Self.setUpReplies[0], now: Self.t0 + 2 * Self.ms),
            case .none = machine.received(Self.setUpReplies[1], now: Self.t0 + 2 * Self.ms)
        else {
            Issue.record("AUTH and SELECT are steps")
            return
        }
        #expect(!machine.isReady)
        guard case .ready(let event) = machine.received(Self.setUpReplies[2], now: Self.t0 + 2 * Self.ms) else {
            Issue.record("the script's digest ends the set-up")
            return
        }
        #expect(event == .connected)
        #expect(machine.isReady)
        #expect(machine.nextDeadline == nil, "nothing in flight, nothing to wait for")
        // The digest is compared without regard to case.
        var upper = Self.machine(password: false)
        _ = upper.start(now: 0)
        upper.connected(now: 0)
        _ = upper.received(.other(.status("OK")), now: 0)
        let digest = Self.digest.map { (0x61...0x66).contains($0) ? $0 - 0x20 : $0 }
        guard case .ready = upper.received(.other(.bulk(digest)), now: 0) else {
            Issue.record("an upper-case digest is the same digest")
            return
        }
    }

    @Test(arguments: [
        (RedisReply.error("WRONGPASS invalid username-password pair"), 0, RedisClientError.Code.auth),
        (.error("NOAUTH Authentication required."), 1, .auth),
        (.error("ERR DB index is out of range"), 1, .script),
        (.status("QUEUED"), 0, .protocolError),
        (.bulk(Array("not-the-digest".utf8)), 2, .protocolError),
    ])
    func aRefusedSetUpStepLosesTheConnection(reply: RedisReply, step: Int, code: RedisClientError.Code) {
        var machine = Self.machine()
        _ = machine.start(now: 0)
        machine.connected(now: 0)
        for index in 0..<step { _ = machine.received(Self.setUpReplies[index], now: 0) }
        let loss = Self.loss(machine.received(.other(reply), now: Self.t0 + 10 * Self.ms))
        #expect(loss?.error.code == code)
        #expect(loss?.event == .lost(RedisClientError(code, "")))
        // The reason names the error's code word only, never the rest of the server's text.
        #expect(loss?.error.reason.contains("username-password") == false)
        #expect(!machine.isReady)
    }

    @Test func theSetUpMustEndWithinTheConnectTimeout() {
        var machine = Self.machine()
        _ = machine.start(now: 0)
        machine.connected(now: Self.t0 + 5 * Self.ms)
        guard case .none = machine.timerFired(now: Self.t0 + 1_999 * Self.ms) else {
            Issue.record("fired before the connect timeout")
            return
        }
        let loss = Self.loss(machine.timerFired(now: Self.t0 + 2_000 * Self.ms))
        #expect(loss?.error.code == .timeout)
        #expect(loss?.event == .lost(RedisClientError(.timeout, "")))
    }

    // MARK: Requests

    @Test func repliesAreMatchedByOrderAndTag() throws {
        var machine = Self.ready()
        let first = Self.send(&machine, 1, at: Self.t0 + 1 * Self.ms)
        let second = Self.send(&machine, 2, at: Self.t0 + 2 * Self.ms)
        #expect(machine.inFlightCount == 2)
        let one = Self.answered(
            machine.received(.tagged(tag: first, answers: Self.one(.init(0))), now: Self.t0 + 3 * Self.ms))
        #expect(one?.0 == 1)
        #expect(try one?.1.get() == RedisScriptAnswer(0))
        guard
            case .answers(let answers, _) = machine.received(
                .tagged(tag: second, answers: Self.one(.init(0, 5_000_000))), now: Self.t0 + 5 * Self.ms),
            let answer = answers.first, answers.count == 1
        else {
            Issue.record("the second reply answers the second request")
            return
        }
        #expect(answer.request == 2)
        #expect(try answer.result.get() == RedisScriptAnswer(0, 5_000_000))
        #expect(answer.latency == 3 * Self.ms)
        #expect(machine.inFlightCount == 0)
    }

    @Test func aReplyWithAnotherRequestsTagFailsEveryRequestInFlightAndLosesTheConnection() {
        var machine = Self.ready()
        let first = Self.send(&machine, 1, at: 0)
        Self.send(&machine, 2, at: 0)
        Self.submit(&machine, 3, at: 0)
        let loss = Self.loss(
            machine.received(.tagged(tag: first + 1, answers: Self.one(.init(0))), now: Self.t0 + 1 * Self.ms))
        #expect(loss?.error.code == .protocolError)
        #expect(loss?.failed == [1, 2, 3], "the calls in flight, then the requests queued")
        #expect(loss?.event == .lost(RedisClientError(.protocolError, "")))
        #expect(!machine.isReady)
        #expect(Self.submit(&machine, 4, at: Self.t0 + 2 * Self.ms) == .refused)
    }

    @Test(arguments: [
        RedisPipelineReply.other(.integer(0)),
        .other(.bulk(Array("abc".utf8))),
        .other(.array([.bulk(RedisTag.bytes(1)), .bulk(Array("x".utf8))])),
        .other(.array([.bulk(RedisTag.bytes(1)), .integer(0)])),
        .tagged(tag: 1, answers: [.init(0), .init(0)]),
    ])
    func aReplyOfAnotherShapeLosesTheConnection(reply: RedisPipelineReply) {
        var machine = Self.ready()
        #expect(Self.send(&machine, 1, at: 0) == 1)
        let loss = Self.loss(machine.received(reply, now: 0))
        #expect(loss?.error.code == .protocolError)
        #expect(loss?.failed == [1])
    }

    @Test func aReplyThatNoRequestAskedForLosesTheConnection() {
        var machine = Self.ready()
        let loss = Self.loss(machine.received(.tagged(tag: 0, answers: Self.one(.init(0))), now: 0))
        #expect(loss?.error.code == .protocolError)
        #expect(loss?.failed == [])
        // A request queued but not yet written has no reply to come either.
        var queued = Self.ready()
        Self.submit(&queued, 1, at: 0)
        let early = Self.loss(queued.received(.tagged(tag: 1, answers: Self.one(.init(0))), now: 0))
        #expect(early?.error.code == .protocolError)
        #expect(early?.failed == [1])
    }

    @Test func aScriptErrorAnswersItsRequestAndKeepsTheConnection() {
        var machine = Self.ready()
        Self.send(&machine, 1, at: 0)
        let answer = Self.answered(
            machine.received(.other(.error("WRONGTYPE Operation against a key holding the wrong kind")), now: 0))
        #expect(answer?.0 == 1)
        #expect(throws: RedisClientError(.script, "")) { try answer?.1.get() }
        #expect(machine.isReady)
    }

    @Test func noScriptLoadsTheScriptAgainAndSendsTheRequestOnceMore() {
        var machine = Self.ready()
        let tag = Self.send(&machine, 1, at: 0)
        guard
            case .reloading = machine.received(
                .other(.error("NOSCRIPT No matching script.")), now: Self.t0 + 1 * Self.ms)
        else {
            Issue.record("NOSCRIPT reloads")
            return
        }
        #expect(Self.written(&machine) == "SCRIPT-LOAD-BYTES;EVALSHA-\(tag):1;")
        guard case .none = machine.received(.other(.bulk(Self.digest)), now: Self.t0 + 2 * Self.ms) else {
            Issue.record("the reload's reply answers nobody")
            return
        }
        #expect(
            Self.answered(machine.received(.tagged(tag: tag, answers: Self.one(.init(0))), now: Self.t0 + 3 * Self.ms))?
                .0 == 1)

        // Once only: a second NOSCRIPT for the same request is the script's failure.
        let again = Self.send(&machine, 2, at: Self.t0 + 4 * Self.ms)
        _ = machine.received(.other(.error("NOSCRIPT No matching script.")), now: Self.t0 + 5 * Self.ms)
        _ = machine.received(.other(.bulk(Self.digest)), now: Self.t0 + 5 * Self.ms)
        let failed = Self.answered(
            machine.received(.other(.error("NOSCRIPT No matching script.")), now: Self.t0 + 6 * Self.ms))
        #expect(failed?.0 == 2)
        #expect(throws: RedisClientError(.script, "")) { try failed?.1.get() }
        #expect(again > tag)
        #expect(machine.isReady)
    }

    @Test func aReloadThatDoesNotAnswerTheDigestLosesTheConnection() {
        var machine = Self.ready()
        Self.send(&machine, 1, at: 0)
        _ = machine.received(.other(.error("NOSCRIPT No matching script.")), now: 0)
        let loss = Self.loss(machine.received(.other(.error("ERR no")), now: 0))
        #expect(loss?.error.code == .protocolError)
        #expect(loss?.failed == [1])
    }

    // MARK: Calls of several requests

    @Test func requestsWrittenTogetherJoinOneCallAndItsReplyAnswersEachInOrder() throws {
        var machine = Self.ready()
        for id in 1...3 { Self.submit(&machine, id, at: Self.t0 + UInt64(id) * Self.ms) }
        #expect(machine.inFlightCount == 3)
        var tags: [UInt64] = []
        #expect(Self.written(&machine, joins: { _, _ in true }, tags: &tags) == "EVALSHA-1:1,2,3;")
        #expect(tags == [1])
        guard
            case .answers(let answers, _) = machine.received(
                .tagged(tag: 1, answers: [.init(0), .init(7), .init(0, 9)]), now: Self.t0 + 10 * Self.ms)
        else {
            Issue.record("one reply answers the call's three requests")
            return
        }
        #expect(answers.map(\.request) == [1, 2, 3])
        #expect(try answers.map { try $0.result.get() } == [.init(0), .init(7), .init(0, 9)])
        #expect(answers.map(\.latency) == [9 * Self.ms, 8 * Self.ms, 7 * Self.ms], "each from its own submission")
        #expect(machine.inFlightCount == 0)
    }

    @Test func aCallCarriesAtMostTheBatchAndOnlyTheRequestsTheFormatterJoins() {
        var machine = Self.ready(maximumBatch: 4)
        for id in 1...10 { Self.submit(&machine, id, at: 0) }
        #expect(
            Self.written(&machine, joins: { _, _ in true }) == "EVALSHA-1:1,2,3,4;EVALSHA-2:5,6,7,8;EVALSHA-3:9,10;")
        // A request the formatter does not join (here: odd after even) starts the next call.
        var parity = Self.ready()
        for id in [2, 4, 5, 7, 6] { Self.submit(&parity, id, at: 0) }
        #expect(
            Self.written(&parity, joins: { $0 % 2 == $1 % 2 }) == "EVALSHA-1:2,4;EVALSHA-2:5,7;EVALSHA-3:6;")
    }

    @Test func aReplyWithAnotherNumberOfAnswersThanItsCallLosesTheConnection() {
        var machine = Self.ready()
        for id in 1...3 { Self.submit(&machine, id, at: 0) }
        _ = Self.written(&machine, joins: { _, _ in true })
        let loss = Self.loss(machine.received(.tagged(tag: 1, answers: [.init(0), .init(0)]), now: 0))
        #expect(loss?.error.code == .protocolError)
        #expect(loss?.failed == [1, 2, 3])
    }

    @Test func aScriptErrorFailsEveryRequestOfItsCallAndNoScriptSendsTheWholeCallAgain() throws {
        var machine = Self.ready()
        for id in 1...2 { Self.submit(&machine, id, at: 0) }
        _ = Self.written(&machine, joins: { _, _ in true })
        guard case .answers(let failed, _) = machine.received(.other(.error("ERR boom")), now: Self.t0 + 1 * Self.ms)
        else {
            Issue.record("a script error answers the call")
            return
        }
        #expect(failed.map(\.request) == [1, 2])
        for answer in failed { #expect(throws: RedisClientError(.script, "")) { try answer.result.get() } }

        for id in 3...4 { Self.submit(&machine, id, at: Self.t0 + 2 * Self.ms) }
        _ = Self.written(&machine, joins: { _, _ in true })
        guard
            case .reloading = machine.received(
                .other(.error("NOSCRIPT No matching script.")), now: Self.t0 + 3 * Self.ms)
        else {
            Issue.record("NOSCRIPT reloads")
            return
        }
        #expect(Self.written(&machine) == "SCRIPT-LOAD-BYTES;EVALSHA-2:3,4;", "the same call, its tag kept")
        _ = machine.received(.other(.bulk(Self.digest)), now: Self.t0 + 4 * Self.ms)
        guard
            case .answers(let answers, _) = machine.received(
                .tagged(tag: 2, answers: [.init(0), .init(1)]), now: Self.t0 + 5 * Self.ms)
        else {
            Issue.record("the call sent again is answered")
            return
        }
        #expect(answers.map(\.request) == [3, 4])
    }

    // MARK: Batching

    @Test func requestsWaitForTheRepliesInFlightOnlyWhileTheServerIsNear() {
        var machine = Self.ready()
        // Idle: at once.
        #expect(Self.submit(&machine, 1, at: 0) == .flush)
        var tags: [UInt64] = []
        _ = Self.written(&machine, tags: &tags)
        let first = tags[0]
        // No round trip measured yet: a far server is assumed, so at once too.
        #expect(Self.submit(&machine, 2, at: 0) == .flush)
        _ = Self.written(&machine, tags: &tags)
        let second = tags[0]
        // Replies after 100 µs: a near server.
        _ = machine.received(.tagged(tag: first, answers: Self.one(.init(0))), now: 100_000)
        machine.endOfRead()
        #expect(Self.submit(&machine, 3, at: 100_000) == .deferred)
        #expect(Self.submit(&machine, 4, at: 110_000) == .deferred)
        // They leave together, after the reply in flight: one call when the formatter joins them.
        _ = machine.received(.tagged(tag: second, answers: Self.one(.init(0))), now: 150_000)
        machine.endOfRead()
        #expect(Self.written(&machine, joins: { _, _ in true }) == "EVALSHA-3:3,4;")

        // A far server (1 ms round trips): every request goes out at once.
        var far = Self.ready()
        let tag = Self.send(&far, 1, at: 0)
        Self.send(&far, 2, at: 0)
        _ = far.received(.tagged(tag: tag, answers: Self.one(.init(0))), now: Self.t0 + 1 * Self.ms)
        far.endOfRead()
        #expect(Self.submit(&far, 3, at: Self.t0 + 1 * Self.ms) == .flush)
    }

    // MARK: Deadlines

    @Test func noRequestWaitsPastTheTimeout() {
        var machine = Self.ready(timeout: 100 * Self.ms)
        Self.send(&machine, 1, at: Self.t0 + 10 * Self.ms)
        Self.send(&machine, 2, at: Self.t0 + 30 * Self.ms)
        #expect(machine.nextDeadline == Self.t0 + 110 * Self.ms)
        guard case .none = machine.timerFired(now: Self.t0 + 109 * Self.ms) else {
            Issue.record("fired before the deadline")
            return
        }
        let loss = Self.loss(machine.timerFired(now: Self.t0 + 110 * Self.ms))
        #expect(loss?.error.code == .timeout)
        #expect(loss?.failed == [1, 2])
        #expect(loss?.event == .lost(RedisClientError(.timeout, "")))
        #expect(!machine.isReady)
    }

    @Test func aQueuedRequestHasItsDeadlineToo() {
        var machine = Self.ready(timeout: 100 * Self.ms)
        Self.submit(&machine, 1, at: Self.t0 + 10 * Self.ms)
        #expect(machine.nextDeadline == Self.t0 + 110 * Self.ms, "not yet written, already waiting")
        #expect(Self.loss(machine.timerFired(now: Self.t0 + 110 * Self.ms))?.failed == [1])
        // A call's deadline is its oldest request's.
        var joined = Self.ready(timeout: 100 * Self.ms)
        Self.submit(&joined, 1, at: Self.t0 + 10 * Self.ms)
        Self.submit(&joined, 2, at: Self.t0 + 20 * Self.ms)
        _ = Self.written(&joined, joins: { _, _ in true })
        #expect(joined.nextDeadline == Self.t0 + 110 * Self.ms)
    }

    @Test func theDeadlineFollowsTheOldestRequestStillWaiting() {
        var machine = Self.ready(timeout: 100 * Self.ms)
        let first = Self.send(&machine, 1, at: 0)
        Self.send(&machine, 2, at: Self.t0 + 40 * Self.ms)
        _ = machine.received(.tagged(tag: first, answers: Self.one(.init(0))), now: Self.t0 + 50 * Self.ms)
        #expect(machine.nextDeadline == Self.t0 + 140 * Self.ms)
    }

    @Test func aRequestSentAgainAfterNoScriptKeepsItsDeadline() {
        var machine = Self.ready(timeout: 100 * Self.ms)
        Self.send(&machine, 1, at: 0)
        Self.send(&machine, 2, at: Self.t0 + 50 * Self.ms)
        _ = machine.received(.other(.error("NOSCRIPT No matching script.")), now: Self.t0 + 60 * Self.ms)
        // Request 1 now waits behind request 2, and its deadline is still the earliest.
        #expect(machine.nextDeadline == Self.t0 + 100 * Self.ms)
        #expect(Self.loss(machine.timerFired(now: Self.t0 + 100 * Self.ms))?.failed == [2, 1])
    }

    // MARK: Reconnection and events

    @Test func reconnectionWaitsFiftyMillisecondsDoublingToFiveSecondsWithJitter() {
        var machine = Self.machine()
        var now: Instant = 0
        _ = machine.start(now: now)
        var waits: [UInt64] = []
        var events: [RedisPipelineEvent] = []
        for _ in 0..<10 {
            guard let loss = machine.failed(RedisClientError(.refused, "cannot connect"), now: now) else {
                Issue.record("a failed attempt is a loss")
                return
            }
            if let event = loss.event { events.append(event) }
            waits.append(loss.retryAt - now)
            #expect(machine.nextDeadline == loss.retryAt)
            guard case .none = machine.timerFired(now: loss.retryAt - 1) else {
                Issue.record("reconnected early")
                return
            }
            now = loss.retryAt
            guard case .connect = machine.timerFired(now: now) else {
                Issue.record("no attempt when the wait is over")
                return
            }
        }
        let bases: [UInt64] = [50, 100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000, 5_000]
        for (wait, base) in zip(waits, bases) {
            #expect(wait >= base * Self.ms && wait <= (base + base / 5) * Self.ms, "\(wait) for \(base) ms")
        }
        // Jitter: not every wait is its base.
        #expect(zip(waits, bases).contains { $0 != $1 * Self.ms })
        // One loss reported, however many attempts failed.
        #expect(events == [.lost(RedisClientError(.refused, ""))])
    }

    @Test func theSameSeedPacesAlikeAndAnotherDoesNot() {
        func waits(seed: UInt64) -> [UInt64] {
            var machine = Self.machine(seed: seed)
            var now: Instant = 0
            _ = machine.start(now: 0)
            var waits: [UInt64] = []
            for _ in 0..<6 {
                let loss = machine.failed(RedisClientError(.refused, ""), now: now)!
                waits.append(loss.retryAt - now)
                now = loss.retryAt
                _ = machine.timerFired(now: now)
            }
            return waits
        }
        #expect(waits(seed: 1) == waits(seed: 1))
        #expect(waits(seed: 1) != waits(seed: 2))
    }

    @Test func aLossIsReportedOnceAndAReturnOnceAndThePacingStartsAgain() {
        var machine = Self.ready()
        var events: [RedisPipelineEvent] = [.connected]
        var now: Instant = 0
        // Lost while connected, then two failed attempts, then back.
        let loss = machine.failed(RedisClientError(.closed, "the server closed the connection"), now: now)!
        if let event = loss.event { events.append(event) }
        for _ in 0..<2 {
            now = machine.nextDeadline!
            _ = machine.timerFired(now: now)
            if let event = machine.failed(RedisClientError(.refused, ""), now: now)!.event { events.append(event) }
        }
        now = machine.nextDeadline!
        guard case .connect = machine.timerFired(now: now) else {
            Issue.record("no attempt")
            return
        }
        machine.connected(now: now)
        for reply in Self.setUpReplies {
            if case .ready(let event?) = machine.received(reply, now: now) { events.append(event) }
        }
        #expect(events == [.connected, .lost(RedisClientError(.closed, "")), .connected])
        // Connected again: the next loss waits 50 ms again, not 400.
        let next = machine.failed(RedisClientError(.closed, ""), now: now)!
        #expect(next.retryAt - now <= 60 * Self.ms)
        #expect(next.event == .lost(RedisClientError(.closed, "")))
    }

    @Test func aFirstAttemptThatFailsIsReportedAsLost() {
        var machine = Self.machine()
        _ = machine.start(now: 0)
        #expect(machine.failed(RedisClientError(.tls, ""), now: 0)?.event == .lost(RedisClientError(.tls, "")))
    }

    @Test func stoppingAnswersWhatIsInFlightAndRefusesTheRest() {
        var machine = Self.ready()
        Self.send(&machine, 1, at: 0)
        Self.submit(&machine, 2, at: 0)
        #expect(machine.stop() == [1, 2])
        #expect(machine.isStopped)
        #expect(machine.nextDeadline == nil)
        #expect(Self.submit(&machine, 3, at: 0) == .refused)
        #expect(machine.failed(RedisClientError(.closed, ""), now: 0) == nil, "nothing more is reported")
        guard case .none = machine.timerFired(now: Self.t0 + 10_000 * Self.ms) else {
            Issue.record("a stopped machine reconnects")
            return
        }
    }
}
