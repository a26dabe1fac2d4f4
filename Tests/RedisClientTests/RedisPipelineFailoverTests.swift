import MonotonicTime
import Testing

@testable import RedisClient

/// The pipeline's machine when Redis is replaced under it (docs/DESIGN.md, "Failover"), with a test clock: a server that
/// is not a writable primary is left like a lost one, and one that answers every call with an error is reported as
/// failing, so that the relay never says "shared" while no decision is made in Redis.
@Suite struct RedisPipelineFailoverTests {
    typealias Machine = RedisPipelineMachine<Int>
    typealias Base = RedisPipelineMachineTests

    static let ms = Base.ms
    static let t0 = Base.t0
    static let role = Array("ROLE-BYTES;".utf8)
    static let primary = RedisPipelineReply.other(.array([.bulk(Array("master".utf8)), .integer(0), .array([])]))

    /// A machine whose set-up is AUTH, ROLE, SCRIPT LOAD, as the shell makes it.
    static func machine() -> Machine {
        let setUp: [Machine.SetUpCommand] = [
            .init(kind: .auth, bytes: Base.auth), .init(kind: .role, bytes: role),
            .init(kind: .scriptLoad, bytes: Base.scriptLoad),
        ]
        return Machine(
            configuration: .init(
                timeout: 100 * ms, connectTimeout: 2_000 * ms, setUp: setUp, scriptLoad: Base.scriptLoad,
                scriptDigest: Base.digest),
            seed: 3)
    }

    /// Connected at `now`, with the set-up's replies (`role` for ROLE) given as far as they go.
    static func settingUp(_ machine: inout Machine, role: RedisPipelineReply, at now: Instant) -> Machine.ReplyResult {
        if !machine.isConnecting { _ = machine.start(now: now) }
        machine.connected(now: now)
        _ = Base.written(&machine)
        var last = Machine.ReplyResult.none
        for reply in [.other(.status("OK")), role, .other(.bulk(Base.digest))] {
            last = machine.received(reply, now: now)
            if case .lost = last { return last }
        }
        return last
    }

    static func ready(at now: Instant = 0) -> Machine {
        var machine = machine()
        _ = settingUp(&machine, role: primary, at: now)
        return machine
    }

    @Test(arguments: [
        ("READONLY You can't write against a read only replica.", "read-only"),
        ("LOADING Redis is loading the dataset in memory", "loading"),
        ("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", "lost its primary"),
    ])
    func aServerThatCannotCountIsLeftAndEveryRequestInFlightFails(message: String, why: String) throws {
        var machine = Self.ready()
        Base.send(&machine, 1, at: Self.t0 + 1 * Self.ms)
        Base.send(&machine, 2, at: Self.t0 + 2 * Self.ms)
        Base.submit(&machine, 3, at: Self.t0 + 3 * Self.ms)
        let loss = try #require(Base.loss(machine.received(.other(.error(message)), now: Self.t0 + 4 * Self.ms)))
        // Every request in flight or queued is answered at once (the caller decides without the store).
        #expect(loss.failed == [1, 2, 3])
        #expect(loss.error.code == .notPrimary)
        #expect(loss.error.reason.contains(why))
        // The reason names the code word, never the server's text after it.
        #expect(!loss.error.reason.contains("replica-serve-stale-data"))
        #expect(loss.event == .lost(RedisClientError(.notPrimary, "")))
        #expect(!machine.isReady)
        #expect(Base.submit(&machine, 4, at: Self.t0 + 5 * Self.ms) == .refused)
        // A new connection after the reconnection delay (50 ms and up to a fifth more), as for any loss.
        #expect(loss.retryAt >= Self.t0 + 54 * Self.ms && loss.retryAt <= Self.t0 + 64 * Self.ms)
        guard case .none = machine.timerFired(now: loss.retryAt - 1) else {
            Issue.record("reconnected before the delay")
            return
        }
        guard case .connect = machine.timerFired(now: loss.retryAt) else {
            Issue.record("no new connection")
            return
        }
        // The new connection reaches the primary: it is used, and reported as a return.
        guard case .ready(let event) = Self.settingUp(&machine, role: Self.primary, at: loss.retryAt) else {
            Issue.record("the primary was not used")
            return
        }
        #expect(event == .connected)
    }

    @Test func aServerThatKeepsAnsweringReadOnlyIsLeftAgainAndReportedOnce() throws {
        var machine = Self.ready()
        var now: Instant = 0
        var events: [RedisPipelineEvent] = []
        var waits: [UInt64] = []
        for _ in 0..<4 {
            Base.send(&machine, 1, at: now)
            let loss = try #require(Base.loss(machine.received(.other(.error("READONLY no")), now: now)))
            if let event = loss.event { events.append(event) }
            waits.append(loss.retryAt - now)
            now = loss.retryAt
            guard case .connect = machine.timerFired(now: now) else {
                Issue.record("no new connection")
                return
            }
            // ROLE cannot be asked of this server (an ACL without it): the first call finds it read-only again.
            let setUp = Self.settingUp(&machine, role: .other(.error("NOPERM this user has no permissions")), at: now)
            guard case .ready = setUp else {
                Issue.record("a refused ROLE does not stop the set-up")
                return
            }
        }
        #expect(events == [.lost(RedisClientError(.notPrimary, ""))])
        // Not announced as a return at each attempt, and the delay grows as for a server that cannot be reached.
        #expect(waits == waits.sorted())
        #expect(waits[3] >= 400 * Self.ms)
        // Once a call is answered the server counts: it is reported, and the delay starts again from 50 ms.
        let tag = Base.send(&machine, 9, at: now)
        guard
            case .answers(_, let event) = machine.received(.tagged(tag: tag, answers: [RedisScriptAnswer(0)]), now: now)
        else {
            Issue.record("no answer")
            return
        }
        #expect(event == .connected)
        let next = machine.failed(RedisClientError(.closed, ""), now: now)
        #expect(next.map { $0.retryAt - now <= 60 * Self.ms } == true)
    }

    @Test func roleNamingAReplicaLeavesTheServerBeforeAnyCall() throws {
        var machine = Self.machine()
        let replica = RedisPipelineReply.other(
            .array([.bulk(Array("slave".utf8)), .bulk(Array("10.0.0.2".utf8)), .integer(6379)]))
        let loss = try #require(Base.loss(Self.settingUp(&machine, role: replica, at: 0)))
        #expect(loss.error.code == .notPrimary)
        #expect(loss.error.reason.contains("slave, not the primary"))
        #expect(loss.event == .lost(RedisClientError(.notPrimary, "")))
        #expect(!machine.isReady)
        // A ROLE reply of another shape is a protocol error.
        var other = Self.machine()
        let broken = try #require(Base.loss(Self.settingUp(&other, role: .other(.integer(1)), at: 0)))
        #expect(broken.error.code == .protocolError)
    }

    @Test(arguments: [
        ("LOADING Redis is loading", RedisClientError.Code.notPrimary, "loading"),
        ("WRONGPASS invalid username-password pair or user is disabled.", .auth, "password or user name is wrong"),
        ("NOAUTH Authentication required.", .auth, "requires a password"),
        ("ERR AUTH <password> called without any password configured", .auth, "refused AUTH"),
    ])
    func aRefusedAuthSaysWhyAndALoadingServerIsNotAnAuthProblem(
        message: String, code: RedisClientError.Code, why: String
    ) throws {
        var machine = Self.machine()
        _ = machine.start(now: 0)
        machine.connected(now: 0)
        let loss = try #require(Base.loss(machine.received(.other(.error(message)), now: Self.t0 + 1 * Self.ms)))
        #expect(loss.error.code == code)
        #expect(loss.error.reason.contains(why), "\(loss.error.reason)")
        #expect(!loss.error.reason.contains("username-password"))
    }

    @Test func callsAnsweredWithErrorsReportFailingOnceAndAnAnswerReportsTheReturn() throws {
        var machine = Self.ready()
        var events: [RedisPipelineEvent] = []
        func call(_ id: Int, _ reply: RedisPipelineReply, at now: Instant) {
            let tag = Base.send(&machine, id, at: now)
            let result = machine.received(
                reply == .other(.status("ok")) ? .tagged(tag: tag, answers: [RedisScriptAnswer(0)]) : reply, now: now)
            guard case .answers(let answers, let event) = result else {
                Issue.record("a call's error keeps the connection")
                return
            }
            #expect(answers.map(\.request) == [id])
            if let event { events.append(event) }
        }
        let error = RedisPipelineReply.other(.error("OOM command not allowed when used memory > 'maxmemory'."))
        call(1, .other(.status("ok")), at: Self.t0 + 1 * Self.ms)
        call(2, error, at: Self.t0 + 2 * Self.ms)
        call(3, error, at: Self.t0 + 3 * Self.ms)
        #expect(events == [.failing(RedisClientError(.script, ""))])
        #expect(machine.isReady, "the connection is kept")
        call(4, .other(.status("ok")), at: Self.t0 + 4 * Self.ms)
        call(5, .other(.status("ok")), at: Self.t0 + 5 * Self.ms)
        #expect(events == [.failing(RedisClientError(.script, "")), .connected])
        // A loss after failing is reported.
        call(6, error, at: Self.t0 + 6 * Self.ms)
        let loss = machine.failed(RedisClientError(.closed, ""), now: Self.t0 + 7 * Self.ms)
        #expect(loss?.event == .lost(RedisClientError(.closed, "")))
        #expect(
            events == [.failing(RedisClientError(.script, "")), .connected, .failing(RedisClientError(.script, ""))])
    }
}
