import Testing

@testable import HTTP2Client

/// The pool's decisions without sockets or threads: placement, proving, retries, suspects after
/// GOAWAY, pacing and replacement, with time passed in as instants (the test clock).
@Suite("PoolStateMachine")
struct PoolStateMachineTests {
    typealias Pool = PoolStateMachine
    static let t0 = ContinuousClock.now

    static func request(deadline: Duration = .seconds(10)) -> PendingRequest {
        PendingRequest(request: HTTP2Request(path: "/"), deadline: t0 + deadline) { _ in }
    }

    static func answered(_ request: PendingRequest, _ status: Int = 200) -> Pool.Ended {
        Pool.Ended(request: request, outcome: .answered(status: status), response: HTTP2Response(status: status))
    }

    /// Submits `request` and returns the connection it went to (starting it if new).
    static func place(_ request: PendingRequest, in pool: inout Pool, now: ContinuousClock.Instant = t0) -> Int? {
        switch pool.submit(request, now: now) {
        case .slot(let id, _), .newConnection(let id, _): id
        case .queued, .rejected: nil
        }
    }

    /// A pool whose connection 1 is up, proven and carries `requests` (handed over).
    static func provenPool(maxConnections: Int = 2, requests: [PendingRequest]) -> Pool {
        var pool = Pool(maxConnections: maxConnections, maxStreams: 100)
        let first = request()
        _ = place(first, in: &pool)
        _ = pool.takeInbox(of: 1)
        _ = pool.finish(
            connection: 1, report: Pool.Report(results: [answered(first)], established: true, proven: true), now: t0)
        for request in requests { _ = place(request, in: &pool) }
        _ = pool.takeInbox(of: 1)
        return pool
    }

    @Test func aNewConnectionCarriesOneRequestUntilAnAnswerProvesIt() {
        var pool = Pool(maxConnections: 1, maxStreams: 100)
        let (a, b, c) = (Self.request(), Self.request(), Self.request())
        #expect(pool.submit(a, now: Self.t0) == .newConnection(id: 1, notBefore: nil))
        #expect(pool.submit(b, now: Self.t0) == .queued)
        _ = pool.takeInbox(of: 1)
        // 403 does not prove it (the relay's rule); the next request goes alone again.
        var effects = pool.finish(
            connection: 1, report: Pool.Report(results: [Self.answered(a, 403)], established: true), now: Self.t0)
        #expect(effects.deliveries.count == 1)
        #expect(pool.takeInbox(of: 1).map { $0 === b } == [true])
        #expect(pool.submit(c, now: Self.t0) == .queued)
        effects = pool.finish(
            connection: 1, report: Pool.Report(results: [Self.answered(b)], established: true, proven: true),
            now: Self.t0)
        #expect(pool.takeInbox(of: 1).map { $0 === c } == [true])
        #expect(pool.slots.first?.phase == .open)
    }

    @Test func aBusyConnectionGetsCompanyUpToTheLimit() {
        var pool = Self.provenPool(requests: (0..<Pool.spreadThreshold).map { _ in Self.request() })
        #expect(pool.submit(Self.request(), now: Self.t0) == .newConnection(id: 2, notBefore: nil))
        #expect(pool.statistics.connectionsOpen == 2)
    }

    @Test func aRefusedRequestIsSentAgainOnAnotherConnectionAtMostThreeTimesInAll() {
        let refused = Self.request()
        var pool = Self.provenPool(requests: [refused])
        var effects = pool.finish(
            connection: 1,
            report: Pool.Report(results: [.init(request: refused, outcome: .refusedStream)], retire: true),
            now: Self.t0)
        #expect(effects.deliveries.isEmpty)
        #expect(effects.start.map(\.id) == [2])
        var retry = pool.takeInbox(of: 2)
        #expect(retry.map(\.sends) == [1])
        effects = pool.finish(
            connection: 2,
            report: Pool.Report(results: [.init(request: retry[0], outcome: .refusedStream)], retire: true),
            now: Self.t0)
        retry = pool.takeInbox(of: effects.start[0].id)
        #expect(retry.map(\.sends) == [2])
        // The third send is the last.
        effects = pool.finish(
            connection: effects.start[0].id,
            report: Pool.Report(results: [.init(request: retry[0], outcome: .refusedStream)], retire: true),
            now: Self.t0)
        #expect(effects.deliveries.count == 1)
        #expect((try? effects.deliveries[0].result.get()) == nil)
    }

    @Test(arguments: [
        StreamOutcome.reset(code: 2), .lost("reset"), .timedOut(written: true), .tooLarge, .timedOut(written: false),
    ])
    func aRequestThatMayHaveBeenProcessedOrTimedOutIsNeverSentAgain(_ outcome: StreamOutcome) {
        let request = Self.request()
        var pool = Self.provenPool(requests: [request])
        let effects = pool.finish(
            connection: 1, report: Pool.Report(results: [.init(request: request, outcome: outcome)]), now: Self.t0)
        #expect(effects.deliveries.count == 1)
        if case .failure(let error) = effects.deliveries.first?.result {
            #expect(error.mayHaveBeenProcessed == outcome.wasSent)
        }
        #expect(pool.statistics.retries == 0)
    }

    @Test func aRequestWhoseDeadlinePassedIsNotRetried() {
        let request = Self.request(deadline: .seconds(1))
        var pool = Self.provenPool(requests: [request])
        let effects = pool.finish(
            connection: 1, report: Pool.Report(results: [.init(request: request, outcome: .notSent)], retire: true),
            now: Self.t0 + .seconds(1))
        #expect(effects.deliveries.count == 1)
    }

    @Test func suspectsOfAGoawayGoAloneToAFreshConnectionInStreamOrderAndTheCauseIsFound() {
        let poisonous = Self.request()
        let innocent = (0..<3).map { _ in Self.request() }
        let bystander = Self.request()
        let filler = (0..<(Pool.spreadThreshold - 4)).map { _ in Self.request() }
        var pool = Self.provenPool(maxConnections: 2, requests: [poisonous] + innocent + filler)
        // Connection 2 carries other traffic and must never get a suspect.
        #expect(Self.place(bystander, in: &pool) == 2)
        // GOAWAY on connection 1: the poisonous push (stream 3) and those after it refused.
        let refused = [(innocent[1], 7), (poisonous, 3), (innocent[0], 5), (innocent[2], 9)].map {
            Pool.Ended(request: $0.0, outcome: .refusedByGoaway(alone: false, stream: Int32($0.1)))
        }
        var effects = pool.finish(
            connection: 1, report: Pool.Report(results: refused, retire: true, goaway: true), now: Self.t0)
        #expect(effects.deliveries.isEmpty)
        let fresh = effects.start.map(\.id)
        #expect(fresh.count == 1, "a connection for suspects")
        #expect(pool.slots.first { $0.id == 2 }?.inbox.allSatisfy { !$0.suspect } ?? true)
        let first = pool.takeInbox(of: fresh[0])
        #expect(first.count == 1)
        #expect(first.first?.request.path == poisonous.request.path && first.first?.sends == 1)
        #expect(pool.suspects.count == 3)
        // Alone on the fresh connection it draws GOAWAY again: it is the cause and fails now.
        effects = pool.finish(
            connection: fresh[0],
            report: Pool.Report(
                results: [.init(request: first[0], outcome: .refusedByGoaway(alone: true, stream: 1))],
                established: true, retire: true, goaway: true),
            now: Self.t0 + .milliseconds(10))
        #expect(effects.deliveries.count == 0, "alone once: one more try")
        let again = effects.start
        #expect(again.count == 1)
        // The second GOAWAY in a row paces the next connection.
        #expect(again[0].notBefore == Self.t0 + .milliseconds(10) + .milliseconds(250))
        let alone = pool.takeInbox(of: again[0].id)
        #expect(alone.count == 1 && alone[0].drewGoawayAlone)
        effects = pool.finish(
            connection: again[0].id,
            report: Pool.Report(
                results: [.init(request: alone[0], outcome: .refusedByGoaway(alone: true, stream: 1))],
                established: true, retire: true, goaway: true),
            now: Self.t0 + .milliseconds(300))
        #expect(effects.deliveries.count == 1)
        if case .failure(let error) = effects.deliveries.first?.result {
            #expect(error.code == .refused && !error.mayHaveBeenProcessed)
        }
        // The innocent suspects follow on a connection of their own, in stream order, and succeed.
        guard let next = effects.start.first else {
            Issue.record("no connection for the remaining suspects")
            return
        }
        let carried = pool.takeInbox(of: next.id)
        #expect(carried.count == 1 && carried[0].sends == 1)
        #expect(carried.first?.deadline == innocent[0].deadline)
        #expect(pool.goawayStreak == 3)
        _ = pool.finish(
            connection: next.id,
            report: Pool.Report(results: [Self.answered(carried[0])], established: true, proven: true),
            now: Self.t0 + .seconds(1))
        #expect(pool.goawayStreak == 0, "a proven connection after the GOAWAYs ends the pacing")
        #expect(pool.takeInbox(of: next.id).count == 2, "the other suspects now go together")
    }

    @Test func aConnectionThatWasUpAndIsLostIsReplacedAtOnce() {
        var pool = Self.provenPool(requests: [])
        let effects = pool.finish(connection: 1, report: Pool.Report(established: true, retire: true), now: Self.t0)
        #expect(effects.exit)
        #expect(effects.start.count == 1)
        #expect(pool.statistics.connectionsReplaced == 1)
    }

    @Test func aConnectionThatCannotConnectFailsTheQueueInsteadOfEachRequestTryingItsOwn() {
        var pool = Pool(maxConnections: 1, maxStreams: 100)
        let requests = (0..<3).map { _ in Self.request() }
        for request in requests { _ = pool.submit(request, now: Self.t0) }
        let inbox = pool.takeInbox(of: 1)
        let failure = HTTP2ClientError(
            .connectFailed, "cannot connect: Connection refused", mayHaveBeenProcessed: false)
        let effects = pool.finish(
            connection: 1,
            report: Pool.Report(
                results: inbox.map { .init(request: $0, outcome: .connectFailed(failure)) }, retire: true),
            now: Self.t0)
        // The first is tried once more elsewhere; the waiting ones fail now.
        #expect(effects.deliveries.count == 2)
        #expect(effects.start.count == 1)
    }

    @Test func shutDownReturnsTheQueuedAndRejectsNewRequests() {
        var pool = Pool(maxConnections: 1, maxStreams: 100)
        _ = pool.submit(Self.request(), now: Self.t0)
        _ = pool.submit(Self.request(), now: Self.t0)
        #expect(pool.shutDown().count == 1)
        #expect(pool.submit(Self.request(), now: Self.t0) == .rejected)
    }

    @Test func reconnectDelaysGrowAfterGoawaysInARow() {
        #expect(Pool.reconnectDelay(afterGoaways: 1) == .zero)
        #expect(Pool.reconnectDelay(afterGoaways: 2) == .milliseconds(250))
        #expect(Pool.reconnectDelay(afterGoaways: 3) == .milliseconds(500))
        #expect(Pool.reconnectDelay(afterGoaways: 20) == .milliseconds(4000))
    }
}
