import MonotonicTime
import Testing

@testable import HTTP2Client

/// The pool's decisions without sockets or a loop: placement, proving, retries, suspects after
/// GOAWAY, pacing and replacement, with time passed in as instants of a test clock.
@Suite("PoolStateMachine")
struct PoolStateMachineTests {
    typealias Pool = PoolStateMachine
    static let millisecond: UInt64 = 1_000_000
    static let second: UInt64 = 1_000_000_000
    static let t0 = Instant(nanoseconds: 1_000 * second)

    static func request(deadline: UInt64 = 10 * second, path: String = "/") -> PendingRequest {
        PendingRequest(request: HTTP2Request(path: path), deadline: t0 + deadline) { _ in }
    }

    static func answered(_ request: PendingRequest, _ status: Int = 200) -> Pool.Ended {
        Pool.Ended(request: request, outcome: .answered(status: status), response: HTTP2Response(status: status))
    }

    /// Submits `request` and returns the connection it went to (starting it if new).
    static func place(_ request: PendingRequest, in pool: inout Pool, now: Instant = t0) -> Int? {
        switch pool.submit(request, now: now) {
        case .connection(let id), .newConnection(let id, _): id
        case .queued, .rejected: nil
        }
    }

    /// The requests `effects` gives to connection `id` (a new one's first, or assignments).
    static func given(to id: Int, _ effects: Pool.Effects) -> [PendingRequest] {
        effects.start.filter { $0.id == id }.compactMap(\.first)
            + effects.assignments.filter { $0.connection == id }.map(\.request)
    }

    /// A pool whose connection 1 is up, proven and carries `requests`.
    static func provenPool(maxConnections: Int = 2, requests: [PendingRequest]) -> Pool {
        var pool = Pool(maxConnections: maxConnections, maxStreams: 100)
        let first = request()
        _ = place(first, in: &pool)
        _ = pool.finish(
            connection: 1, report: Pool.Report(results: [answered(first)], established: true, proven: true), now: t0)
        for request in requests { _ = place(request, in: &pool) }
        return pool
    }

    @Test func aNewConnectionCarriesOneRequestUntilAnAnswerProvesIt() {
        var pool = Pool(maxConnections: 1, maxStreams: 100)
        let (a, b, c) = (Self.request(), Self.request(), Self.request())
        #expect(pool.submit(a, now: Self.t0) == .newConnection(id: 1, notBefore: nil))
        #expect(pool.submit(b, now: Self.t0) == .queued)
        // 403 does not prove it (the relay's rule); the next request goes alone again.
        var effects = pool.finish(
            connection: 1, report: Pool.Report(results: [Self.answered(a, 403)], established: true), now: Self.t0)
        #expect(effects.deliveries.count == 1)
        #expect(Self.given(to: 1, effects).map { $0 === b } == [true])
        #expect(pool.submit(c, now: Self.t0) == .queued)
        effects = pool.finish(
            connection: 1, report: Pool.Report(results: [Self.answered(b)], established: true, proven: true),
            now: Self.t0)
        #expect(Self.given(to: 1, effects).map { $0 === c } == [true])
        #expect(pool.slots.first?.phase == .open)
        #expect(pool.submit(Self.request(), now: Self.t0) == .connection(id: 1))
    }

    /// docs/DESIGN.md, "The APNs request": a new connection's one stream is bounded. Its first request unanswered for
    /// `probeBound` once the connection is up no longer holds the requests queued behind it.
    @Test func aStalledFirstRequestHoldsTheQueueOnlyForTheProbeBound() {
        var pool = Pool(maxConnections: 1, maxStreams: 100)
        let (a, b, c) = (Self.request(), Self.request(), Self.request())
        #expect(pool.submit(a, now: Self.t0) == .newConnection(id: 1, notBefore: nil))
        #expect(pool.submit(b, now: Self.t0) == .queued)
        // Connecting takes 3 s: the bound counts from the connection being up, when `a` is sent.
        let up = Self.t0 + 3 * Self.second
        #expect(pool.nextProbeBound == nil)
        var effects = pool.finish(connection: 1, report: Pool.Report(established: true), now: up)
        #expect(effects.assignments.isEmpty)
        #expect(pool.nextProbeBound == up + Pool.probeBound)
        #expect(pool.submit(c, now: up + 500 * Self.millisecond) == .queued)
        #expect(pool.probesOutlasted(now: up + Pool.probeBound - Self.millisecond).isEmpty)
        // A second without an answer: b and c go to the connection (its server's own limit still applies).
        let outlasted = pool.probesOutlasted(now: up + Pool.probeBound)
        #expect(outlasted.map(\.connection) == [1, 1])
        #expect(outlasted.map { $0.request === b } == [true, false])
        #expect(outlasted.map { $0.request === c } == [false, true])
        #expect(pool.nextProbeBound == nil)
        #expect(pool.queue.isEmpty)
        // Later requests go there at once, without waiting for `a`.
        #expect(pool.submit(Self.request(), now: up + 2 * Self.second) == .connection(id: 1))
        // `a` is answered at last and proves the connection: open, as without the bound.
        effects = pool.finish(
            connection: 1, report: Pool.Report(results: [Self.answered(a)], established: true, proven: true),
            now: up + 3 * Self.second)
        #expect(effects.deliveries.count == 1)
        #expect(pool.slots.first?.phase == .open)
    }

    @Test func theProbesWaitRestartsWithEachAnswerAndCountsOnlyWhileRequestsWait() {
        var pool = Pool(maxConnections: 1, maxStreams: 100)
        let (a, b) = (Self.request(), Self.request())
        _ = pool.submit(a, now: Self.t0)
        _ = pool.finish(connection: 1, report: Pool.Report(established: true), now: Self.t0)
        // Nothing waits: no timer is needed.
        #expect(pool.nextProbeBound == nil)
        #expect(pool.submit(b, now: Self.t0 + 200 * Self.millisecond) == .queued)
        #expect(pool.nextProbeBound == Self.t0 + Pool.probeBound)
        // 403 does not prove the connection; b is the probe now, and its own second starts.
        let answeredAt = Self.t0 + 600 * Self.millisecond
        let effects = pool.finish(
            connection: 1, report: Pool.Report(results: [Self.answered(a, 403)], established: true), now: answeredAt)
        #expect(Self.given(to: 1, effects).map { $0 === b } == [true])
        #expect(pool.submit(Self.request(), now: answeredAt) == .queued)
        #expect(pool.nextProbeBound == answeredAt + Pool.probeBound)
        #expect(pool.probesOutlasted(now: Self.t0 + Pool.probeBound).isEmpty)
        #expect(pool.probesOutlasted(now: answeredAt + Pool.probeBound).count == 1)
        // A request arriving after the bound passed goes straight to the connection.
        #expect(pool.submit(Self.request(), now: answeredAt + Pool.probeBound) == .connection(id: 1))
    }

    @Test func aBusyConnectionGetsCompanyUpToTheLimit() {
        var pool = Self.provenPool(requests: (0..<Pool.spreadThreshold).map { _ in Self.request() })
        #expect(pool.submit(Self.request(), now: Self.t0) == .newConnection(id: 2, notBefore: nil))
        #expect(pool.statistics.connectionsOpen == 2)
        #expect(pool.statistics.connectionsOpened == 2)
    }

    @Test func aRefusedRequestIsSentAgainOnAnotherConnectionAtMostThreeTimesInAll() {
        let refused = Self.request()
        var pool = Self.provenPool(requests: [refused])
        var effects = pool.finish(
            connection: 1,
            report: Pool.Report(results: [.init(request: refused, outcome: .refusedStream)], retire: true),
            now: Self.t0)
        #expect(effects.deliveries.isEmpty)
        #expect(effects.exit)
        #expect(effects.start.map(\.id) == [2])
        var retry = Self.given(to: 2, effects)
        #expect(retry.map(\.sends) == [1])
        effects = pool.finish(
            connection: 2,
            report: Pool.Report(results: [.init(request: retry[0], outcome: .refusedStream)], retire: true),
            now: Self.t0)
        retry = Self.given(to: effects.start[0].id, effects)
        #expect(retry.map(\.sends) == [2])
        // The third send is the last.
        effects = pool.finish(
            connection: effects.start[0].id,
            report: Pool.Report(results: [.init(request: retry[0], outcome: .refusedStream)], retire: true),
            now: Self.t0)
        #expect(effects.deliveries.count == 1)
        #expect((try? effects.deliveries[0].result.get()) == nil)
        #expect(pool.statistics.retries == 2)
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
        let request = Self.request(deadline: Self.second)
        var pool = Self.provenPool(requests: [request])
        let effects = pool.finish(
            connection: 1, report: Pool.Report(results: [.init(request: request, outcome: .notSent)], retire: true),
            now: Self.t0 + Self.second)
        #expect(effects.deliveries.count == 1)
    }

    @Test func suspectsOfAGoawayGoAloneToAFreshConnectionInStreamOrderAndTheCauseIsFound() {
        let poisonous = Self.request(path: "/poisonous")
        let innocent = (0..<3).map { Self.request(path: "/innocent-\($0)") }
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
        #expect(Self.given(to: 2, effects).isEmpty)
        let first = Self.given(to: fresh[0], effects)
        #expect(first.count == 1)
        #expect(first.first?.request.path == "/poisonous")
        #expect(first.first?.sends == 1 && first.first?.suspect == true)
        #expect(pool.suspects.count == 3)
        // Alone on the fresh connection it draws GOAWAY again: one more try, alone.
        effects = pool.finish(
            connection: fresh[0],
            report: Pool.Report(
                results: [.init(request: first[0], outcome: .refusedByGoaway(alone: true, stream: 1))],
                established: true, retire: true, goaway: true),
            now: Self.t0 + 10 * Self.millisecond)
        #expect(effects.deliveries.count == 0, "alone once: one more try")
        let again = effects.start
        #expect(again.count == 1)
        // The second GOAWAY in a row paces the next connection.
        #expect(again[0].notBefore == Self.t0 + 10 * Self.millisecond + 250 * Self.millisecond)
        let alone = Self.given(to: again[0].id, effects)
        #expect(alone.count == 1 && alone[0].drewGoawayAlone)
        // Twice alone, twice GOAWAY: it is the cause, and fails now.
        effects = pool.finish(
            connection: again[0].id,
            report: Pool.Report(
                results: [.init(request: alone[0], outcome: .refusedByGoaway(alone: true, stream: 1))],
                established: true, retire: true, goaway: true),
            now: Self.t0 + 300 * Self.millisecond)
        #expect(effects.deliveries.count == 1)
        if case .failure(let error) = effects.deliveries.first?.result {
            #expect(error.code == .refused && !error.mayHaveBeenProcessed)
        }
        // The innocent suspects follow on a connection of their own, in stream order, and succeed.
        guard let next = effects.start.first else {
            Issue.record("no connection for the remaining suspects")
            return
        }
        let carried = Self.given(to: next.id, effects)
        #expect(carried.count == 1 && carried[0].sends == 1)
        #expect(carried.first?.request.path == "/innocent-0")
        #expect(pool.goawayStreak == 3)
        effects = pool.finish(
            connection: next.id,
            report: Pool.Report(results: [Self.answered(carried[0])], established: true, proven: true),
            now: Self.t0 + Self.second)
        #expect(pool.goawayStreak == 0, "a proven connection after the GOAWAYs ends the pacing")
        #expect(Self.given(to: next.id, effects).count == 2, "the other suspects now go together")
    }

    @Test func aConnectionThatWasUpAndIsLostIsReplacedAtOnce() {
        var pool = Self.provenPool(requests: [])
        let effects = pool.finish(connection: 1, report: Pool.Report(established: true, retire: true), now: Self.t0)
        #expect(effects.exit)
        #expect(effects.start.count == 1)
        #expect(effects.start.first?.first == nil)
        #expect(pool.statistics.connectionsReplaced == 1)
    }

    /// Connections that an answer retired one after another are replaced at a growing pace, as after GOAWAYs: a
    /// server that refuses every new connection's first request that way is not met with a burst of connections.
    @Test func connectionsRetiredByAnAnswerInARowArePacedLikeGoaways() {
        var pool = Self.provenPool(requests: [])
        var effects = pool.finish(
            connection: 1, report: Pool.Report(established: true, retire: true, retiredByAnswer: true), now: Self.t0)
        #expect(effects.start.count == 1)
        #expect(effects.start.first?.notBefore == nil, "the first replacement opens at once")
        let second = effects.start[0].id
        effects = pool.finish(
            connection: second, report: Pool.Report(established: true, retire: true, retiredByAnswer: true),
            now: Self.t0)
        #expect(pool.goawayStreak == 2)
        #expect(effects.start.first?.notBefore == Self.t0 + 250 * Self.millisecond)
    }

    @Test func aConnectionThatCannotConnectFailsTheQueueInsteadOfEachRequestTryingItsOwn() {
        var pool = Pool(maxConnections: 1, maxStreams: 100)
        let requests = (0..<3).map { _ in Self.request() }
        for request in requests { _ = pool.submit(request, now: Self.t0) }
        let failure = HTTP2ClientError(
            .connectFailed, "cannot connect: Connection refused", mayHaveBeenProcessed: false)
        let effects = pool.finish(
            connection: 1,
            report: Pool.Report(results: [.init(request: requests[0], outcome: .connectFailed(failure))], retire: true),
            now: Self.t0)
        // The first is tried once more elsewhere; the waiting ones fail now.
        #expect(effects.deliveries.count == 2)
        #expect(effects.start.count == 1)
        #expect(effects.deliveries.allSatisfy { (try? $0.result.get()) == nil })
    }

    @Test func queuedRequestsExpireAtTheirDeadline() {
        var pool = Pool(maxConnections: 1, maxStreams: 100)
        _ = pool.submit(Self.request(), now: Self.t0)
        _ = pool.submit(Self.request(deadline: Self.second), now: Self.t0)
        _ = pool.submit(Self.request(deadline: 5 * Self.second), now: Self.t0)
        #expect(pool.earliestQueuedDeadline == Self.t0 + Self.second)
        #expect(pool.removeExpired(now: Self.t0 + Self.second - 1).isEmpty)
        #expect(pool.removeExpired(now: Self.t0 + Self.second).count == 1)
        #expect(pool.earliestQueuedDeadline == Self.t0 + 5 * Self.second)
    }

    /// The queue timer's decisions: when it is due, which requests fail on it and which go to a connection.
    @Test func theQueueTimerFailsExpiredRequestsAndEndsAnOutlastedProbesHold() throws {
        var pool = Pool(maxConnections: 1, maxStreams: 100)
        #expect(pool.nextWakeUp == nil)
        let (first, soon, later) = (Self.request(), Self.request(deadline: 500 * Self.millisecond), Self.request())
        #expect(pool.submit(first, now: Self.t0) == .newConnection(id: 1, notBefore: nil))
        #expect(pool.submit(soon, now: Self.t0) == .queued)
        #expect(pool.submit(later, now: Self.t0) == .queued)
        #expect(pool.nextWakeUp == Self.t0 + 500 * Self.millisecond)
        _ = pool.finish(connection: 1, report: Pool.Report(established: true), now: Self.t0 + 100 * Self.millisecond)
        // Fired early (a timer armed for an earlier wake-up): nothing is due.
        let early = pool.timerFired(now: Self.t0 + 499 * Self.millisecond)
        #expect(early.deliveries.isEmpty && early.assignments.isEmpty)
        let expired = pool.timerFired(now: Self.t0 + 500 * Self.millisecond)
        #expect(expired.deliveries.map { $0.request === soon } == [true])
        let error = try #require(Self.error(of: expired.deliveries.first))
        #expect(error.code == .timeout && error.reason == "no connection in time" && !error.mayHaveBeenProcessed)
        #expect(expired.assignments.isEmpty)
        // The probe has waited its bound since the connection came up: `later` goes to it.
        #expect(pool.nextWakeUp == Self.t0 + 100 * Self.millisecond + Pool.probeBound)
        let outlasted = pool.timerFired(now: Self.t0 + 100 * Self.millisecond + Pool.probeBound)
        #expect(outlasted.deliveries.isEmpty)
        #expect(outlasted.assignments.map { $0.request === later && $0.connection == 1 } == [true])
        #expect(pool.nextWakeUp == nil)
        _ = pool.submit(Self.request(deadline: Self.second), now: Self.t0)
        _ = pool.shutDown()
        #expect(pool.nextWakeUp == nil)
    }

    @Test func aRequestEndedOnAConnectionThePoolNoLongerCountsGetsItsAnswerOrItsError() throws {
        let request = Self.request()
        let answered = Pool.delivery(of: Self.answered(request, 200))
        #expect((try? answered.result.get())?.status == 200)
        let lost = try #require(
            Self.error(of: Pool.delivery(of: Pool.Ended(request: request, outcome: .lost("gone"), response: nil))))
        #expect(lost.code == .connectionLost && lost.reason == "gone" && lost.mayHaveBeenProcessed)
        let shutDown = try #require(Self.error(of: Pool.shutDownDelivery(of: request)))
        #expect(shutDown.code == .shutdown && !shutDown.mayHaveBeenProcessed)
    }

    static func error(of delivery: Pool.Delivery?) -> HTTP2ClientError? {
        guard case .failure(let error) = delivery?.result else { return nil }
        return error
    }

    @Test func shutDownReturnsTheQueuedAndRejectsNewRequests() {
        var pool = Pool(maxConnections: 1, maxStreams: 100)
        _ = pool.submit(Self.request(), now: Self.t0)
        _ = pool.submit(Self.request(), now: Self.t0)
        #expect(pool.shutDown().count == 1)
        #expect(pool.submit(Self.request(), now: Self.t0) == .rejected)
        #expect(pool.statistics.connectionsOpen == 0)
    }

    @Test func reconnectDelaysGrowAfterGoawaysInARow() {
        #expect(Pool.reconnectDelay(afterGoaways: 1) == 0)
        #expect(Pool.reconnectDelay(afterGoaways: 2) == 250 * Self.millisecond)
        #expect(Pool.reconnectDelay(afterGoaways: 3) == 500 * Self.millisecond)
        #expect(Pool.reconnectDelay(afterGoaways: 20) == 4000 * Self.millisecond)
    }
}
