import MonotonicTime
import RelayTestSupport
import Testing

@testable import RedisClient

/// The pipeline's logic under long random sequences of inputs (requests, writes that join some of them, replies of
/// every kind, deadlines, losses, reconnections), against a model of what the server has been sent: every request
/// is answered exactly once (by its reply, a script error, a loss or the stop), in the order its call was written,
/// and the machine's count of requests waiting always matches the model's.
@Suite struct RedisPipelineMachineSequenceTests {
    typealias Machine = RedisPipelineMachine<Int>

    static let ms: UInt64 = 1_000_000
    static let digest = Array("0123456789abcdef0123456789abcdef01234567".utf8)

    /// What the server owes, oldest first: a call's reply (its tag and requests), or the reply to a `SCRIPT LOAD`.
    enum Owed: Equatable {
        case call(tag: UInt64, requests: [Int], retried: Bool)
        case scriptLoad
    }

    struct Model {
        var machine: Machine
        var now: Instant = 0
        var nextRequest = 0
        /// Requests taken and not yet answered.
        var waiting: Set<Int> = []
        /// Requests the machine took.
        var taken = 0
        /// How many times each request was answered.
        var answered: [Int: Int] = [:]
        var owed: [Owed] = []
        var random: SplitMix64

        init(seed: UInt64, maximumBatch: Int) {
            var configuration = Machine.Configuration(
                timeout: 100 * RedisPipelineMachineSequenceTests.ms,
                connectTimeout: 2_000 * RedisPipelineMachineSequenceTests.ms,
                setUp: [.init(kind: .scriptLoad, bytes: Array("LOAD;".utf8))], scriptLoad: Array("LOAD;".utf8),
                scriptDigest: RedisPipelineMachineSequenceTests.digest)
            configuration.maximumBatch = maximumBatch
            machine = Machine(configuration: configuration, seed: seed)
            random = SplitMix64(seed: seed)
        }

        mutating func answer(_ requests: [Int]) {
            for request in requests {
                answered[request, default: 0] += 1
                waiting.remove(request)
            }
        }

        mutating func lost(_ loss: Machine.Loss) {
            answer(loss.failed)
            owed.removeAll()
        }

        /// Sets the connection up when it is not ready: connects (after waiting for the next attempt, if one is
        /// due) and answers the set-up.
        mutating func reconnect() {
            guard !machine.isReady else { return }
            _ = machine.start(now: now)
            if setUp() { return }
            // Waiting for the next attempt.
            guard let deadline = machine.nextDeadline else { return }
            now = max(now, deadline)
            if case .connect = machine.timerFired(now: now) { _ = setUp() }
        }

        /// The stream connects and the set-up is answered, if an attempt is under way; true when ready.
        mutating func setUp() -> Bool {
            machine.connected(now: now)
            machine.flush(format: { _, _ in ([], 1) }, write: { _ in })
            _ = machine.received(.other(.bulk(RedisPipelineMachineSequenceTests.digest)), now: now)
            return machine.isReady
        }

        mutating func step() {
            now += random.next() % (5 * RedisPipelineMachineSequenceTests.ms)
            switch random.next() % 100 {
            case 0..<40:
                // A request.
                let id = nextRequest
                nextRequest += 1
                if machine.submit(id, now: now) != .refused {
                    waiting.insert(id)
                    taken += 1
                }
            case 40..<55:
                // A write: the formatter joins the requests after a call's first up to one whose number ends in 0
                // or 5, which starts a call of its own.
                var written: [Owed] = []
                machine.flush(
                    format: { requests, tag in
                        let taken = 1 + requests.dropFirst().prefix { $0 % 5 != 0 }.count
                        written.append(.call(tag: tag, requests: Array(requests.prefix(taken)), retried: false))
                        return (Array("EVALSHA;".utf8), taken)
                    }, write: { _ in })
                owed += written
            case 55..<80:
                reply()
            case 80..<88:
                // A timer, on time or late.
                if let deadline = machine.nextDeadline, random.next() % 2 == 0 { now = max(now, deadline) }
                switch machine.timerFired(now: now) {
                case .lost(let loss): lost(loss)
                case .connect: _ = setUp()
                case .none: break
                }
            case 88..<90:
                // The stream fails.
                if let loss = machine.failed(RedisClientError(.closed, ""), now: now) { lost(loss) }
            default:
                reconnect()
            }
        }

        /// The server's next reply: usually the right one, sometimes a script error, NOSCRIPT or a wrong one.
        mutating func reply() {
            guard let head = owed.first else { return }
            switch head {
            case .scriptLoad:
                owed.removeFirst()
                _ = machine.received(.other(.bulk(RedisPipelineMachineSequenceTests.digest)), now: now)
            case .call(let tag, let requests, let retried):
                let roll = random.next() % 20
                let reply: RedisPipelineReply
                if roll < 15 {
                    reply = .tagged(tag: tag, answers: requests.map { RedisScriptAnswer(Int64($0)) })
                } else if roll < 17 {
                    reply = .other(.error("NOSCRIPT No matching script."))
                } else if roll < 19 {
                    reply = .other(.error("ERR boom"))
                } else {
                    reply = .tagged(tag: tag &+ 1, answers: [RedisScriptAnswer(0)])
                }
                switch machine.received(reply, now: now) {
                case .answers(let answers, _):
                    owed.removeFirst()
                    #expect(answers.map(\.request) == requests, "a call's requests are answered in their order")
                    if case .tagged = reply {
                        #expect(answers.allSatisfy { (try? $0.result.get()) == RedisScriptAnswer(Int64($0.request)) })
                    }
                    answer(answers.map(\.request))
                case .reloading:
                    #expect(!retried, "NOSCRIPT sends a call again once only")
                    owed.removeFirst()
                    owed += [.scriptLoad, .call(tag: tag, requests: requests, retried: true)]
                case .lost(let loss):
                    lost(loss)
                case .ready, .none:
                    Issue.record("a call's reply answered nobody")
                }
            }
        }
    }

    @Test(arguments: [(UInt64(1), 32), (2, 3), (3, 1), (4, 8), (5, 2)])
    func everyRequestIsAnsweredExactlyOnce(seed: UInt64, maximumBatch: Int) {
        var model = Model(seed: seed, maximumBatch: maximumBatch)
        model.reconnect()
        for _ in 0..<20_000 {
            model.step()
            #expect(model.machine.inFlightCount == model.waiting.count)
            if model.machine.inFlightCount != model.waiting.count { return }
        }
        model.answer(model.machine.stop())
        #expect(model.waiting.isEmpty)
        #expect(model.answered.count == model.taken, "every request taken is answered")
        #expect(model.answered.values.allSatisfy { $0 == 1 }, "no request is answered twice")
        #expect(model.taken > 1_000, "the sequence did make requests")
    }
}
