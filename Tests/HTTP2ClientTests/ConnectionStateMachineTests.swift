import MonotonicTime
import Testing

@testable import HTTP2Client

/// The connection's decisions without sockets: connecting, proving, each stream outcome in each
/// connection state, deadlines and PING, and what the pool is told, with time passed in as
/// instants of a test clock.
@Suite("ConnectionStateMachine")
struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine
    static let second: UInt64 = 1_000_000_000
    static let t0 = Instant(nanoseconds: 1_000 * second)
    static let deadline = t0 + 10 * second

    static func request(deadline: Instant = deadline, body: [UInt8] = []) -> PendingRequest {
        PendingRequest(request: HTTP2Request(path: "/", body: body), deadline: deadline) { _ in }
    }

    /// GOAWAY debug data as APNs sends it.
    static func apnsReason(_ reason: String) -> [UInt8] {
        Array(#"{"reason":"\#(reason)"}"#.utf8)
    }

    /// A connection that is up (TLS and HTTP/2 agreed) at t0.
    static func connected(
        timing: Machine.Timing = Machine.Timing(), proves: @escaping @Sendable (Int) -> Bool = { _ in true }
    )
        -> Machine
    {
        var machine = Machine(timing: timing, provesConnection: proves)
        #expect(machine.start(now: t0) == .connect)
        #expect(machine.connected(http2Agreed: true, now: t0) == .openSession)
        return machine
    }

    /// An open connection with streams 1, 3 and 5 submitted; 1 and 3 written.
    static func open() -> Machine {
        var machine = connected()
        for id: Int32 in [1, 3, 5] {
            #expect(machine.accept(request()) == .submit)
            machine.submitted(machine.nextToSubmit(limit: 100)!, as: id)
        }
        machine.headersWritten(1)
        machine.headersWritten(3)
        _ = machine.takeReport()
        return machine
    }

    /// Feeds a complete answer on `id`.
    static func answer(_ machine: inout Machine, stream id: Int32, status: Int, now: Instant = t0 + second) {
        let name = Array(":status".utf8)
        let value = Array(String(status).utf8)
        name.withUnsafeBufferPointer { name in
            value.withUnsafeBufferPointer { value in machine.headerReceived(stream: id, name: name, value: value) }
        }
        machine.answerEnded(stream: id)
        machine.streamClosed(id, errorCode: 0, now: now)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var testDescription: String
        /// Brings the connection into the state under test.
        var state: @Sendable (inout Machine) -> Void
        var stream: Int32
        var status: Int?
        var resetCode: UInt32
        var outcome: StreamOutcome
        /// Whether the pool sends the request again (first try, deadline ahead).
        var retried: Bool
        var takesStreamsAfter: Bool
    }

    static let cases: [Case] = [
        Case(
            testDescription: "open, answered 200", state: { _ in }, stream: 1, status: 200, resetCode: 0,
            outcome: .answered(status: 200), retried: false, takesStreamsAfter: true),
        Case(
            testDescription: "open, answered 403", state: { _ in }, stream: 1, status: 403, resetCode: 0,
            outcome: .answered(status: 403), retried: false, takesStreamsAfter: true),
        Case(
            testDescription: "open, REFUSED_STREAM", state: { _ in }, stream: 3, status: nil, resetCode: 7,
            outcome: .refusedStream, retried: true, takesStreamsAfter: false),
        Case(
            testDescription: "open, written stream reset INTERNAL_ERROR", state: { _ in }, stream: 3, status: nil,
            resetCode: 2, outcome: .reset(code: 2), retried: false, takesStreamsAfter: true),
        Case(
            testDescription: "open, unwritten stream closed", state: { _ in }, stream: 5, status: nil, resetCode: 8,
            outcome: .notSent, retried: true, takesStreamsAfter: true),
        Case(
            testDescription: "after GOAWAY(3), stream above it",
            state: { $0.goawayReceived(lastStreamID: 3, errorCode: 0, debugData: []) },
            stream: 5, status: nil, resetCode: 7, outcome: .refusedByGoaway(alone: false, stream: 5), retried: true,
            takesStreamsAfter: false),
        Case(
            testDescription: "after GOAWAY(3), written stream at it answered",
            state: { $0.goawayReceived(lastStreamID: 3, errorCode: 0, debugData: []) }, stream: 3, status: 200,
            resetCode: 0, outcome: .answered(status: 200), retried: false, takesStreamsAfter: false),
        Case(
            testDescription: "after GOAWAY(1), written stream above it",
            state: { $0.goawayReceived(lastStreamID: 1, errorCode: 0, debugData: Self.apnsReason("Shutdown")) },
            stream: 3,
            status: nil, resetCode: 0, outcome: .refusedByGoaway(alone: false, stream: 3), retried: true,
            takesStreamsAfter: false),
        Case(
            testDescription: "after GOAWAY(3), written stream below reset",
            state: { $0.goawayReceived(lastStreamID: 3, errorCode: 0, debugData: []) }, stream: 1, status: nil,
            resetCode: 2, outcome: .reset(code: 2), retried: false, takesStreamsAfter: false),
        Case(
            testDescription: "retired by a refused stream, another reset", state: { $0.retire(.refusedStream) },
            stream: 1, status: nil, resetCode: 8, outcome: .reset(code: 8), retried: false, takesStreamsAfter: false),
    ]

    @Test(arguments: cases)
    func aStreamsEndGivesTheRightAnswerAndRetryDecision(_ test: Case) {
        var machine = Self.open()
        test.state(&machine)
        if let status = test.status {
            Self.answer(&machine, stream: test.stream, status: status)
        } else {
            machine.streamClosed(test.stream, errorCode: test.resetCode, now: Self.t0 + Self.second)
        }
        let report = machine.takeReport()
        let outcome = try? #require(report.results.first?.outcome)
        #expect(outcome == test.outcome)
        #expect(machine.takesStreams == test.takesStreamsAfter)
        #expect(report.retire == !test.takesStreamsAfter)
        let pool = PoolStateMachine(maxConnections: 2, maxStreams: 100)
        let request = Self.request()
        if let outcome {
            #expect((pool.retry(of: request, after: outcome, now: Self.t0 + Self.second) != nil) == test.retried)
            #expect(outcome.certainlyNotProcessed == test.retried)
        }
    }

    @Test func anAnswerCarriesStatusHeadersAndBodyAndSkipsInformationalFields() throws {
        var machine = Self.open()
        func header(_ name: String, _ value: String) {
            let (name, value) = (Array(name.utf8), Array(value.utf8))
            name.withUnsafeBufferPointer { n in
                value.withUnsafeBufferPointer { machine.headerReceived(stream: 1, name: n, value: $0) }
            }
        }
        header(":status", "100")
        header("x-informational", "dropped")
        header(":status", "200")
        header("apns-id", "abc")
        let body = Array("{\"ok\":1}".utf8)
        #expect(body.withUnsafeBufferPointer { machine.dataReceived(stream: 1, $0) } == .kept)
        machine.answerEnded(stream: 1)
        machine.streamClosed(1, errorCode: 0, now: Self.t0 + Self.second)
        let result = try #require(machine.takeReport().results.first)
        #expect(result.response?.status == 200)
        #expect(result.response?.headers.map(\.name) == ["apns-id"])
        #expect(result.response?.body == body)
    }

    @Test func anAnswerTooLargeCancelsItsStreamAndFailsItsRequest() throws {
        var machine = Self.open()
        let part = [UInt8](repeating: 1, count: Machine.maxResponseBodyBytes)
        #expect(part.withUnsafeBufferPointer { machine.dataReceived(stream: 1, $0) } == .kept)
        #expect([UInt8(2)].withUnsafeBufferPointer { machine.dataReceived(stream: 1, $0) } == .cancel)
        machine.streamClosed(1, errorCode: 8, now: Self.t0 + Self.second)
        #expect(machine.takeReport().results.first?.outcome == .tooLarge)
    }

    @Test func aNewConnectionIsProvenByTheFirstAnswerItsRuleAccepts() {
        var machine = Self.connected(proves: { $0 != 403 })
        var report = machine.takeReport()
        #expect(report.established && !report.proven)
        #expect(report.events.map(\.kind) == [.connected])
        for (id, status) in [(Int32(1), 403), (3, 200)] {
            _ = machine.accept(Self.request())
            machine.submitted(machine.nextToSubmit(limit: 100)!, as: id)
            Self.answer(&machine, stream: id, status: status)
            report = machine.takeReport()
            #expect(report.proven == (status == 200))
        }
        #expect(report.events.map(\.kind) == [.proven])
        #expect(!machine.hasReport)
    }

    @Test func anAnswerItsRuleNamesRetiresTheConnectionAndWhatWaitsGoesElsewhere() {
        var machine = Machine(provesConnection: { $0 != 403 }, retiresConnection: { $0.status == 429 })
        #expect(machine.start(now: Self.t0) == .connect)
        #expect(machine.connected(http2Agreed: true, now: Self.t0) == .openSession)
        for _ in 0..<3 { _ = machine.accept(Self.request()) }
        for id: Int32 in [1, 3] { machine.submitted(machine.nextToSubmit(limit: 2)!, as: id) }
        _ = machine.takeReport()
        Self.answer(&machine, stream: 3, status: 429)
        #expect(!machine.takesStreams)
        let report = machine.takeReport()
        #expect(report.retire && report.retiredByAnswer && !report.goaway)
        // The answer that retires the connection does not prove it (the pool paces the next connection until one is).
        #expect(!report.proven)
        // The answer is its request's; the request that waited was never sent and goes to another connection.
        let outcomes = report.results.map(\.outcome)
        #expect(outcomes.count == 2 && outcomes.contains(.answered(status: 429)) && outcomes.contains(.notSent))
        #expect(machine.accept(Self.request()) == .ended)
        // An answer the rule does not name leaves the connection open.
        var other = Machine(retiresConnection: { $0.status == 429 })
        #expect(other.start(now: Self.t0) == .connect)
        #expect(other.connected(http2Agreed: true, now: Self.t0) == .openSession)
        _ = other.accept(Self.request())
        other.submitted(other.nextToSubmit(limit: 1)!, as: 1)
        Self.answer(&other, stream: 1, status: 200)
        #expect(other.takesStreams)
        #expect(!other.takeReport().retire)
    }

    @Test func requestsWaitWhileConnectingAndGoOutOnceUpWithinTheServersLimit() {
        var machine = Machine()
        #expect(machine.start(now: Self.t0) == .connect)
        for _ in 0..<3 { #expect(machine.accept(Self.request()) == .wait) }
        #expect(machine.nextToSubmit(limit: 100) == nil)
        _ = machine.connected(http2Agreed: true, now: Self.t0)
        #expect(machine.nextToSubmit(limit: 2) != nil)
        machine.submitted(Self.request(), as: 1)
        #expect(machine.nextToSubmit(limit: 2) != nil)
        machine.submitted(Self.request(), as: 3)
        #expect(machine.nextToSubmit(limit: 2) == nil, "the server's limit")
        #expect(!machine.canSubmit(limit: 2))
        #expect(machine.canSubmit(limit: 3))
    }

    @Test func theRequestBodyIsHandedOverInPartsAndEnds() {
        var machine = Self.connected()
        let body = (0..<10).map { UInt8($0) }
        _ = machine.accept(Self.request(body: body))
        machine.submitted(machine.nextToSubmit(limit: 100)!, as: 1)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4, alignment: 1)
        defer { buffer.deallocate() }
        var sent: [UInt8] = []
        var last = false
        for _ in 0..<5 where !last {
            let part = machine.nextBodyPart(stream: 1, into: buffer)
            sent += buffer.prefix(part.count)
            last = part.last
        }
        #expect(sent == body && last)
    }

    @Test func aGoawayOnAConnectionWithOneStreamMarksItAloneAndIsReportedWithItsReason() {
        var machine = Self.connected()
        _ = machine.accept(Self.request())
        machine.submitted(machine.nextToSubmit(limit: 100)!, as: 1)
        machine.headersWritten(1)
        _ = machine.takeReport()
        machine.goawayReceived(lastStreamID: 0, errorCode: 0, debugData: Self.apnsReason("BadCertificateEnvironment"))
        #expect(machine.goaway?.reason == "BadCertificateEnvironment")
        machine.streamClosed(1, errorCode: 7, now: Self.t0)
        let report = machine.takeReport()
        #expect(report.results.map(\.outcome) == [.refusedByGoaway(alone: true, stream: 1)])
        #expect(report.retire && report.goaway)
        #expect(report.events == [HTTP2ClientEvent(.goaway, "BadCertificateEnvironment")])
        #expect(report.events.first?.detail == "BadCertificateEnvironment")
    }

    @Test(arguments: [
        (#"{"reason":"Shutdown"}"#, "Shutdown"),
        (
            " {\n \"reason\" : \"Shutdown\", \"other\": [1, -2.5e3, {\"a\": null}, true, false, \"x\\\"y\"] }\n",
            "Shutdown"
        ),
        (#"{"other":{"reason":"Nested"},"reason":"Top"}"#, "Top"),
        (#"{"reason":"Shut\u0064own"}"#, "Shutdown"),
        (#"{"reason":"BadCertificateEnvironment","timestamp":1700000000000}"#, "BadCertificateEnvironment"),
        // Not a plain word, not a string, not one object, not JSON, too long: the error code's name instead.
        (#"{"reason":"Shut down"}"#, "NO_ERROR"),
        (#"{"reason":"line\nbreak"}"#, "NO_ERROR"),
        (#"{"reason":""}"#, "NO_ERROR"),
        (#"{"reason":"\#(String(repeating: "a", count: 65))"}"#, "NO_ERROR"),
        (#"{"reason":12}"#, "NO_ERROR"),
        (#"{"reason":"Shutdown"} {}"#, "NO_ERROR"),
        (#"{"reason":"Shutdown""#, "NO_ERROR"),
        (#"{"reason":"Shutdown",}"#, "NO_ERROR"),
        (#"{"reason":"Shutdown","n":01}"#, "NO_ERROR"),
        (#"{"reason":"Shutdown","reason":"Other"}"#, "NO_ERROR"),
        (#"["Shutdown"]"#, "NO_ERROR"),
        ("Shutdown", "NO_ERROR"),
        ("", "NO_ERROR"),
        (#"{"reason":"Shutdown","pad":"\#(String(repeating: "x", count: 1024))"}"#, "NO_ERROR"),
    ])
    func aGoawaysReasonIsItsDebugDatasPlainWordOrElseItsErrorCode(_ debugData: String, _ detail: String) {
        var machine = Self.open()
        machine.goawayReceived(lastStreamID: 3, errorCode: 0, debugData: Array(debugData.utf8))
        #expect(machine.goaway?.reason == (detail == "NO_ERROR" ? nil : detail))
        #expect(machine.takeReport().events == [HTTP2ClientEvent(.goaway, detail)])
    }

    @Test func aSecondGoawayWithoutAReasonKeepsTheFirstOnesReason() {
        var machine = Self.open()
        machine.goawayReceived(lastStreamID: 5, errorCode: 0, debugData: Self.apnsReason("Shutdown"))
        machine.goawayReceived(lastStreamID: 3, errorCode: 0, debugData: Array("not json".utf8))
        #expect(machine.goaway?.reason == "Shutdown")
        #expect(machine.goaway?.lastStreamID == 3)
    }

    @Test(arguments: [
        ("connect failed: connection refused", "Connection refused"),
        ("connection refused", "Connection refused"),
        ("Network is unreachable", "Network is unreachable"),
        ("", ""),
    ])
    func aFailedConnectIsSaidInTheSystemsWords(_ loopWords: String, _ systemWords: String) {
        var machine = Machine()
        _ = machine.start(now: Self.t0)
        _ = machine.accept(Self.request())
        machine.failed(.connect(loopWords))
        let report = machine.takeReport()
        #expect(report.events == [HTTP2ClientEvent(.cannotConnect, systemWords)])
        #expect(report.results.first?.outcome.error?.reason == "cannot connect: \(systemWords)")
    }

    @Test func aTunnelsSetUpEndsJustBeforeTheConnectDeadline() {
        var machine = Machine(timing: Machine.Timing(connectTimeout: 2 * Self.second))
        #expect(machine.tunnelDeadline == nil)
        #expect(machine.start(now: Self.t0) == .connect)
        #expect(machine.tunnelDeadline == Self.t0 + 2 * Self.second - 5_000_000)
        #expect(machine.nextWakeUp() == Self.t0 + 2 * Self.second)
        // A connect bound shorter than 10 ms leaves the tunnel half of it.
        var short = Machine(timing: Machine.Timing(connectTimeout: 6_000_000))
        _ = short.start(now: Self.t0)
        #expect(short.tunnelDeadline == Self.t0 + 3_000_000)
        #expect(short.connected(http2Agreed: true, now: Self.t0 + 1_000_000) == .openSession)
        #expect(short.tunnelDeadline == nil)
    }

    @Test func aGoawaySendsTheRequestsNotYetSubmittedElsewhere() {
        var machine = Self.connected()
        _ = machine.accept(Self.request())
        _ = machine.accept(Self.request())
        machine.submitted(machine.nextToSubmit(limit: 1)!, as: 1)
        machine.goawayReceived(lastStreamID: 1, errorCode: 0, debugData: [])
        #expect(machine.takeReport().results.map(\.outcome) == [.notSent])
        #expect(machine.accept(Self.request()) == .ended)
    }

    @Test func aBrokenConnectionFailsWrittenStreamsAsMaybeProcessedAndOthersAsNotSent() {
        var machine = Self.open()
        machine.failed(.broken("reset by peer", closedByPeer: false))
        let outcomes = machine.takeReport().results.map(\.outcome)
        let lost = StreamOutcome.lost("the connection broke: reset by peer")
        #expect(outcomes == [lost, lost, .notSent])
        #expect(outcomes.map(\.certainlyNotProcessed) == [false, false, true])
        #expect(machine.isClosed)
        // Requests it had not sent yet go elsewhere as never sent.
        #expect(machine.unsentOutcome == .notSent)
        // After GOAWAY(1), the broken connection's streams above it were not processed.
        var afterGoaway = Self.open()
        afterGoaway.goawayReceived(lastStreamID: 1, errorCode: 0, debugData: [])
        afterGoaway.failed(.broken("closed", closedByPeer: true))
        #expect(afterGoaway.takeReport().results.map(\.outcome.certainlyNotProcessed) == [false, true, true])
    }

    @Test func deadlinesCancelStreamsAndRetireTheConnection() {
        var machine = Self.open()
        #expect(machine.nextWakeUp() == Self.deadline)
        #expect(machine.timerFired(now: Self.deadline - 1) == .init())
        let result = machine.timerFired(now: Self.deadline)
        #expect(result.cancel == [1, 3, 5])
        #expect(!result.close)
        let report = machine.takeReport()
        #expect(
            report.results.map(\.outcome) == [
                .timedOut(written: true), .timedOut(written: true), .timedOut(written: false),
            ])
        #expect(report.retire)
        #expect(!machine.takesStreams)
    }

    @Test func anIdleConnectionIsPingedAnsweredKeptUnansweredRetired() {
        let timing = Machine.Timing(pingInterval: 60 * Self.second, pingTimeout: 10 * Self.second)
        var machine = Self.connected(timing: timing)
        #expect(machine.nextWakeUp() == Self.t0 + 60 * Self.second)
        #expect(machine.timerFired(now: Self.t0 + 59 * Self.second) == .init())
        #expect(machine.timerFired(now: Self.t0 + 60 * Self.second) == .init(sendPing: true))
        #expect(machine.nextWakeUp() == Self.t0 + 70 * Self.second)
        // Answered: kept, and the next PING is due 60 s later.
        machine.pingAnswered(now: Self.t0 + 61 * Self.second)
        #expect(machine.takesStreams)
        #expect(machine.timerFired(now: Self.t0 + 75 * Self.second) == .init())
        #expect(machine.timerFired(now: Self.t0 + 121 * Self.second) == .init(sendPing: true))
        _ = machine.takeReport()
        // Unanswered for 10 s: retired and closed, and the problem log hears of it.
        #expect(machine.timerFired(now: Self.t0 + 131 * Self.second) == .init(close: true))
        #expect(machine.isClosed)
        let report = machine.takeReport()
        #expect(report.retire)
        #expect(report.events.map(\.kind) == [.pingUnanswered])
    }

    @Test func aConnectionWithStreamsOpenIsNotPinged() {
        var machine = Self.open()
        #expect(!machine.timerFired(now: Self.t0 + 9 * Self.second).sendPing)
        #expect(machine.nextWakeUp() == Self.deadline)
    }

    @Test func aConnectThatTakesTooLongFailsItsRequestsUnsent() throws {
        var machine = Machine(timing: .init(connectTimeout: 5 * Self.second))
        #expect(machine.start(now: Self.t0) == .connect)
        _ = machine.accept(Self.request(deadline: Self.t0 + 30 * Self.second))
        #expect(machine.nextWakeUp() == Self.t0 + 5 * Self.second)
        #expect(machine.timerFired(now: Self.t0 + 4 * Self.second) == .init())
        #expect(machine.timerFired(now: Self.t0 + 5 * Self.second) == .init(close: true))
        let report = machine.takeReport()
        guard case .connectFailed(let error) = report.results.first?.outcome else {
            Issue.record("expected connectFailed, got \(report.results.map(\.outcome))")
            return
        }
        #expect(error.code == .connectFailed)
        #expect(!error.mayHaveBeenProcessed)
        #expect(report.events == [HTTP2ClientEvent(.cannotConnect, "connect timed out")])
        #expect(report.retire && !report.established)
    }

    @Test func aRequestWhoseDeadlinePassesWhileConnectingTimesOutAndGivesTheConnectionUp() {
        var machine = Machine(timing: .init(connectTimeout: 5 * Self.second))
        _ = machine.start(now: Self.t0)
        _ = machine.accept(Self.request(deadline: Self.t0 + Self.second))
        _ = machine.accept(Self.request(deadline: Self.t0 + 9 * Self.second))
        #expect(machine.nextWakeUp() == Self.t0 + Self.second)
        #expect(machine.timerFired(now: Self.t0 + Self.second) == .init(close: true))
        let outcomes = machine.takeReport().results.map(\.outcome)
        #expect(outcomes.first == .timedOut(written: false))
        #expect(outcomes.count == 2 && outcomes[1].certainlyNotProcessed)
    }

    @Test(arguments: [
        (
            Machine.Failure.resolve("Name or service not known"), HTTP2ClientError.Code.connectFailed,
            HTTP2ClientEvent.Kind.cannotResolve
        ),
        (.connect("Connection refused"), .connectFailed, .cannotConnect),
        (.certificate("unable to get local issuer certificate"), .tls, .tlsVerificationFailed),
        (.handshake("wrong version number"), .tls, .tlsFailed),
    ])
    func aConnectThatFailsSaysWhyToTheRequestAndTheProblemLog(
        _ failure: Machine.Failure, _ code: HTTP2ClientError.Code, _ kind: HTTP2ClientEvent.Kind
    ) {
        var machine = Machine()
        _ = machine.start(now: Self.t0)
        _ = machine.accept(Self.request())
        machine.failed(failure)
        let report = machine.takeReport()
        guard case .connectFailed(let error) = report.results.first?.outcome else {
            Issue.record("expected connectFailed, got \(report.results.map(\.outcome))")
            return
        }
        #expect(error.code == code && !error.mayHaveBeenProcessed)
        #expect(report.events.map(\.kind) == [kind])
        #expect(report.retire && !report.established)
        #expect(machine.accept(Self.request()) == .ended)
    }

    @Test func aServerThatRefusesHTTP2IsNotConnected() {
        var machine = Machine()
        _ = machine.start(now: Self.t0)
        _ = machine.accept(Self.request())
        #expect(machine.connected(http2Agreed: false, now: Self.t0) == .close)
        let report = machine.takeReport()
        #expect(report.events.map(\.kind) == [.alpnRefused])
        #expect(report.results.first?.outcome.error?.code == .tls)
    }

    @Test func aPacedConnectionWaitsForItsTimeThenConnects() {
        var machine = Machine(notBefore: Self.t0 + Self.second / 4)
        #expect(machine.start(now: Self.t0) == .wait)
        #expect(machine.nextWakeUp() == Self.t0 + Self.second / 4)
        // A request whose deadline comes first times out meanwhile.
        #expect(machine.accept(Self.request(deadline: Self.t0 + Self.second / 10)) == .wait)
        #expect(machine.nextWakeUp() == Self.t0 + Self.second / 10)
        #expect(machine.timerFired(now: Self.t0 + Self.second / 10) == .init())
        #expect(machine.takeReport().results.map(\.outcome) == [.timedOut(written: false)])
        #expect(machine.timerFired(now: Self.t0 + Self.second / 4) == .init(connect: true))
        #expect(machine.nextWakeUp() == Self.t0 + Self.second / 4 + Machine.Timing().connectTimeout)
    }

    @Test func shutDownEndsEveryRequestSayingWhetherItWasWritten() {
        var machine = Self.open()
        _ = machine.accept(Self.request())
        let ended = machine.shutDown()
        #expect(
            ended.map(\.outcome) == [
                .shutdown(written: true), .shutdown(written: true), .shutdown(written: false),
                .shutdown(written: false),
            ])
        #expect(ended.map { $0.outcome.error?.mayHaveBeenProcessed } == [true, true, false, false])
        #expect(machine.isClosed)
    }
}
