import HTTP2Sessions
import MonotonicTime
import OutboundConnections
import RelayTestSupport
import Testing

@testable import HTTP2Client

/// What the stream's failures and nghttp2's results mean for the connection, decided by the machine from inputs
/// alone: a stream failure's kind, a read nghttp2 refused or took short, and the round of writing.
@Suite("ConnectionStateMachine: the stream's failures and nghttp2's results")
struct ConnectionSessionResultsTests {
    typealias Machine = ConnectionStateMachine
    typealias Tests = ConnectionStateMachineTests

    // MARK: The stream's failures

    static let tls = "the TLS handshake failed: "
    static let proxy = "proxy 127.0.0.1:3128 "

    @Test(arguments: [
        (
            ClientStreamFailure(.resolve, "Name or service not known"), HTTP2ClientEvent.Kind.cannotResolve,
            "cannot resolve the host: Name or service not known"
        ),
        (
            ClientStreamFailure(.connect, "connect failed: connection refused"), .cannotConnect,
            "cannot connect: Connection refused"
        ),
        (
            ClientStreamFailure(.certificate, "unable to get local issuer certificate"), .tlsVerificationFailed,
            "the server's certificate was not accepted: unable to get local issuer certificate"
        ),
        (ClientStreamFailure(.handshake, "wrong version number"), .tlsFailed, tls + "wrong version number"),
        (ClientStreamFailure(.closedByPeer, "the peer closed"), .tlsFailed, tls + "the peer closed"),
        (ClientStreamFailure(.reset, "connection reset by peer"), .tlsFailed, tls + "connection reset by peer"),
        (ClientStreamFailure(.tls, "bad record mac"), .tlsFailed, tls + "bad record mac"),
        (
            ClientStreamFailure(.connect, proxy + "answered 403", tunnel: .refused), .proxyRefused,
            proxy + "answered 403"
        ),
        (
            ClientStreamFailure(.resolve, proxy + "did not resolve", tunnel: .unreachable), .proxyUnreachable,
            proxy + "did not resolve"
        ),
        (
            ClientStreamFailure(.connect, proxy + "sent no answer", tunnel: .malformed), .proxyMalformed,
            proxy + "sent no answer"
        ),
        (ClientStreamFailure(.connect, proxy + "was silent", tunnel: .timeout), .proxyTimeout, proxy + "was silent"),
        (ClientStreamFailure(.connect, proxy + "closed", tunnel: .closed), .proxyClosed, proxy + "closed"),
    ])
    func aStreamThatFailsWhileConnectingFailsTheConnectWithItsKind(
        _ failure: ClientStreamFailure, _ kind: HTTP2ClientEvent.Kind, _ reason: String
    ) {
        var machine = Machine()
        _ = machine.start(now: Tests.t0)
        _ = machine.accept(Tests.request())
        machine.streamFailed(failure)
        let report = machine.takeReport()
        #expect(report.events.map(\.kind) == [kind])
        guard case .connectFailed(let error) = report.results.first?.outcome else {
            Issue.record("expected connectFailed, got \(report.results.map(\.outcome))")
            return
        }
        #expect(!error.mayHaveBeenProcessed)
        #expect(error.reason == reason)
        #expect(report.retire && !report.established)
    }

    @Test(arguments: [
        (ClientStreamFailure(.closedByPeer, "the peer closed"), "the connection closed before the answer"),
        (ClientStreamFailure(.reset, "connection reset by peer"), "the connection broke: connection reset by peer"),
        (ClientStreamFailure(.tls, "bad record mac"), "the connection broke: bad record mac"),
    ])
    func aStreamThatFailsOnceUpLosesTheWrittenStreams(_ failure: ClientStreamFailure, _ reason: String) {
        var machine = Tests.open()
        machine.streamFailed(failure)
        #expect(machine.takeReport().results.map(\.outcome) == [.lost(reason), .lost(reason), .notSent])
        #expect(machine.isClosed)
    }

    @Test func aProxyThatFailsAfterTheConnectionWasGivenUpIsStillNamed() {
        var machine = Machine(timing: .init(connectTimeout: 5 * Tests.second))
        _ = machine.start(now: Tests.t0)
        _ = machine.accept(Tests.request(deadline: Tests.t0 + Tests.second))
        #expect(machine.timerFired(now: Tests.t0 + Tests.second).close)
        _ = machine.takeReport()
        machine.streamFailed(ClientStreamFailure(.connect, "proxy 127.0.0.1:3128 did not answer", tunnel: .timeout))
        #expect(machine.takeReport().events == [HTTP2ClientEvent(.proxyTimeout, "proxy 127.0.0.1:3128 did not answer")])
    }

    @Test func aStreamClosedQuietlyIsABrokenConnection() {
        var machine = Tests.open()
        machine.streamClosedQuietly()
        let lost = StreamOutcome.lost("the connection broke: the connection closed")
        #expect(machine.takeReport().results.map(\.outcome) == [lost, lost, .notSent])
    }

    // MARK: Reading

    @Test func aReadNghttp2TakesWholeChangesNothing() {
        var machine = Tests.open()
        #expect(machine.read(consumed: 120, of: 120) == .carryOn)
        #expect(!machine.hasReport)
        #expect(machine.takesStreams)
    }

    @Test func aReadNghttp2RefusesBreaksTheConnectionInItsWords() {
        var machine = Tests.open()
        // NGHTTP2_ERR_PROTO: the server broke the protocol (in nghttp2's words, which the shell gives).
        #expect(HTTP2Session.words(ofError: -505) == "Protocol error")
        #expect(machine.read(consumed: -505, of: 120, error: HTTP2Session.words(ofError: -505)) == .breakOff)
        let lost = StreamOutcome.lost("the connection broke: the server broke the HTTP/2 protocol (Protocol error)")
        #expect(machine.takeReport().results.map(\.outcome) == [lost, lost, .notSent])
        #expect(machine.isClosed)
    }

    @Test func aReadNghttp2TakesShortBreaksTheConnection() {
        var machine = Tests.open()
        #expect(machine.read(consumed: 100, of: 120) == .breakOff)
        let lost = StreamOutcome.lost("the connection broke: the HTTP/2 session took 100 of 120 bytes read")
        #expect(machine.takeReport().results.map(\.outcome) == [lost, lost, .notSent])
    }

    // MARK: Submitting

    @Test func aRequestNghttp2GivesNoStreamEndsNotSentAndTheOthersGoOn() {
        var machine = Tests.connected()
        _ = machine.accept(Tests.request())
        _ = machine.accept(Tests.request())
        // NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.
        machine.submitted(machine.nextToSubmit(limit: 100)!, as: -509)
        machine.submitted(machine.nextToSubmit(limit: 100)!, as: 1)
        #expect(machine.takeReport().results.map(\.outcome) == [.notSent])
        #expect(machine.streams.keys.sorted() == [1])
        #expect(machine.takesStreams)
    }

    // MARK: Writing

    @Test(arguments: [
        (100, 100, Machine.WriteStep.gather),
        (100, 1024, .write(last: false)),
        (0, 500, .write(last: true)),
        (0, 0, .done),
    ])
    func aRoundGathersUpToABatchThenWrites(_ length: Int, _ gathered: Int, _ step: Machine.WriteStep) {
        var machine = Tests.open()
        #expect(machine.serialized(length, gathered: gathered, batch: 1024) == step)
        #expect(!machine.hasReport)
    }

    @Test func aRoundNghttp2FailsBreaksTheConnectionInItsWords() {
        var machine = Tests.open()
        // NGHTTP2_ERR_NOMEM.
        #expect(HTTP2Session.words(ofError: -901) == "Out of memory")
        #expect(
            machine.serialized(-901, gathered: 300, batch: 1024, error: HTTP2Session.words(ofError: -901)) == .breakOff)
        let lost = StreamOutcome.lost("the connection broke: nghttp2: Out of memory")
        #expect(machine.takeReport().results.map(\.outcome) == [lost, lost, .notSent])
    }

    /// Random rounds: whatever sizes nghttp2 gives, every byte is written once and in order, each write but a round's
    /// last holds at least a batch, and none holds more than a batch and one chunk.
    @Test func everyByteOfARoundIsWrittenInBatches() {
        var random = SplitMix64(seed: 38)
        let batch = 4096
        var machine = Tests.open()
        for _ in 0..<200 {
            let chunks = (0..<Int.random(in: 0...12, using: &random)).map { _ in
                Int.random(in: 1...3000, using: &random)
            }
            var given = 0
            var gathered = 0
            var writes: [Int] = []
            var index = 0
            var finished = false
            for _ in 0...(chunks.count + 1) {
                let length = index < chunks.count ? chunks[index] : 0
                index += 1
                given += length
                gathered += length
                switch machine.serialized(length, gathered: gathered, batch: batch) {
                case .gather: continue
                case .write(let last):
                    writes.append(gathered)
                    gathered = 0
                    finished = last
                case .done: finished = true
                case .breakOff: Issue.record("no failure was given")
                }
                if finished { break }
            }
            #expect(finished)
            #expect(writes.reduce(0, +) == given)
            #expect(writes.dropLast().allSatisfy { $0 >= batch })
            #expect(writes.allSatisfy { $0 < batch + 3000 })
        }
        #expect(!machine.hasReport)
    }
}
