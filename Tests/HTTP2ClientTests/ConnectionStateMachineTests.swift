import Testing

@testable import HTTP2Client

/// The connection's decisions without sockets: each stream outcome in each connection state, with
/// time passed in as instants (the test clock).
@Suite("ConnectionStateMachine")
struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine
    static let t0 = ContinuousClock.now
    static let deadline = t0 + .seconds(10)

    /// An open connection with streams 1, 3 and 5 submitted; 1 and 3 written.
    static func open() -> Machine {
        var machine = Machine(connectDeadline: t0 + .seconds(5))
        machine.connected(now: t0)
        for id: Int32 in [1, 3, 5] { machine.streamSubmitted(id, deadline: deadline) }
        machine.headersWritten(1)
        machine.headersWritten(3)
        return machine
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
            state: { _ = $0.goawayReceived(lastStreamID: 3, errorCode: 0, reason: nil) },
            stream: 5, status: nil, resetCode: 7, outcome: .refusedByGoaway(alone: false, stream: 5), retried: true,
            takesStreamsAfter: false),
        Case(
            testDescription: "after GOAWAY(3), written stream at it answered",
            state: { _ = $0.goawayReceived(lastStreamID: 3, errorCode: 0, reason: nil) }, stream: 3, status: 200,
            resetCode: 0, outcome: .answered(status: 200), retried: false, takesStreamsAfter: false),
        Case(
            testDescription: "after GOAWAY(1), written stream above it",
            state: { _ = $0.goawayReceived(lastStreamID: 1, errorCode: 0, reason: "Shutdown") }, stream: 3,
            status: nil, resetCode: 0, outcome: .refusedByGoaway(alone: false, stream: 3), retried: true,
            takesStreamsAfter: false),
        Case(
            testDescription: "after GOAWAY(3), written stream below reset",
            state: { _ = $0.goawayReceived(lastStreamID: 3, errorCode: 0, reason: nil) }, stream: 1, status: nil,
            resetCode: 2, outcome: .reset(code: 2), retried: false, takesStreamsAfter: false),
        Case(
            testDescription: "retired by a refused stream, another reset", state: { _ = $0.retire(.refusedStream) },
            stream: 1, status: nil, resetCode: 8, outcome: .reset(code: 8), retried: false, takesStreamsAfter: false),
    ]

    @Test(arguments: cases)
    func aStreamsEndGivesTheRightAnswerAndRetryDecision(_ test: Case) {
        var machine = Self.open()
        test.state(&machine)
        let (outcome, _) = machine.streamClosed(
            test.stream, status: test.status, resetCode: test.resetCode, now: Self.t0 + .seconds(1))
        #expect(outcome == test.outcome)
        #expect(machine.takesStreams == test.takesStreamsAfter)
        let pool = PoolStateMachine(maxConnections: 2, maxStreams: 100)
        let request = PendingRequest(request: HTTP2Request(path: "/"), deadline: Self.deadline) { _ in }
        #expect((pool.retry(of: request, after: outcome, now: Self.t0 + .seconds(1)) != nil) == test.retried)
        #expect(outcome.certainlyNotProcessed == test.retried)
    }

    @Test func aGoawayOnAConnectionWithOneStreamMarksItAlone() {
        var machine = Machine(connectDeadline: Self.t0 + .seconds(5))
        machine.connected(now: Self.t0)
        machine.streamSubmitted(1, deadline: Self.deadline)
        machine.headersWritten(1)
        let actions = machine.goawayReceived(lastStreamID: 0, errorCode: 0, reason: "BadCertificateEnvironment")
        #expect(actions.count == 1)
        #expect(machine.goaway?.reason == "BadCertificateEnvironment")
        #expect(
            machine.streamClosed(1, status: nil, resetCode: 7, now: Self.t0).0
                == .refusedByGoaway(alone: true, stream: 1))
    }

    @Test func aBrokenConnectionFailsWrittenStreamsAsMaybeProcessedAndOthersAsNotSent() {
        var machine = Self.open()
        let lost = machine.connectionLost("reset by peer")
        #expect(lost.map(\.stream) == [1, 3, 5])
        #expect(lost.map(\.outcome) == [.lost("reset by peer"), .lost("reset by peer"), .notSent])
        #expect(lost.map(\.outcome.certainlyNotProcessed) == [false, false, true])
        #expect(machine.isClosed)
        // Requests it had not sent yet go elsewhere as never sent.
        #expect(machine.unsentOutcome == .notSent)
        // After GOAWAY(1), the broken connection's streams above it were not processed.
        var afterGoaway = Self.open()
        _ = afterGoaway.goawayReceived(lastStreamID: 1, errorCode: 0, reason: nil)
        #expect(afterGoaway.connectionLost("closed").map(\.outcome.certainlyNotProcessed) == [false, true, true])
    }

    @Test func deadlinesCancelStreamsAndRetireTheConnection() {
        var machine = Self.open()
        #expect(machine.tick(now: Self.deadline - .milliseconds(1)).isEmpty)
        let actions = machine.tick(now: Self.deadline)
        #expect(actions.contains(.cancel(stream: 1, .timedOut(written: true))))
        #expect(actions.contains(.cancel(stream: 5, .timedOut(written: false))))
        #expect(actions.contains(.retire(.deadline)))
        #expect(!machine.takesStreams)
    }

    @Test func anIdleConnectionIsPingedAnsweredKeptUnansweredRetired() {
        let timing = Machine.Timing(pingInterval: .seconds(60), pingTimeout: .seconds(10))
        var machine = Machine(connectDeadline: Self.t0 + .seconds(5), timing: timing)
        machine.connected(now: Self.t0)
        #expect(machine.nextWakeUp() == Self.t0 + .seconds(60))
        #expect(machine.tick(now: Self.t0 + .seconds(59)).isEmpty)
        #expect(machine.tick(now: Self.t0 + .seconds(60)) == [.sendPing])
        #expect(machine.nextWakeUp() == Self.t0 + .seconds(70))
        // Answered: kept, and the next PING is due 60 s later.
        machine.pingAnswered(now: Self.t0 + .seconds(61))
        #expect(machine.takesStreams)
        #expect(machine.tick(now: Self.t0 + .seconds(75)).isEmpty)
        #expect(machine.tick(now: Self.t0 + .seconds(121)) == [.sendPing])
        // Unanswered for 10 s: retired and closed.
        let actions = machine.tick(now: Self.t0 + .seconds(131))
        #expect(actions == [.retire(.pingUnanswered), .close])
        #expect(machine.isClosed)
    }

    @Test func aConnectionWithStreamsOpenIsNotPinged() {
        var machine = Self.open()
        #expect(!machine.tick(now: Self.t0 + .seconds(9)).contains(.sendPing))
        #expect(machine.nextWakeUp() == Self.deadline)
    }

    @Test func aConnectThatTakesTooLongFailsItsRequestsUnsent() {
        var machine = Machine(connectDeadline: Self.t0 + .seconds(5))
        #expect(machine.tick(now: Self.t0 + .seconds(4)).isEmpty)
        #expect(machine.tick(now: Self.t0 + .seconds(5)) == [.close])
        guard case .connectFailed(let error) = machine.unsentOutcome else {
            Issue.record("expected connectFailed, got \(machine.unsentOutcome)")
            return
        }
        #expect(error.code == .connectFailed)
        #expect(!error.mayHaveBeenProcessed)
    }
}
