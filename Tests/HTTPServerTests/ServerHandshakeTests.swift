import HTTP1
import MonotonicTime
import Testing

@testable import HTTPServer

/// The TLS phase of a server connection, driven with scripted bytes and a test clock: no socket, no TLS library.
@Suite struct ServerHandshakeTests {
    typealias Machine = ServerHandshake
    static let second: UInt64 = 1_000_000_000
    static let timeout = 30 * second
    /// The test clock's instant `seconds` after its origin.
    static func at(_ seconds: UInt64) -> Instant { Instant(nanoseconds: seconds * second) }
    /// A ClientHello's record header as every TLS client sends it (handshake, TLS 1.0 record version, a length).
    static let helloStart: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01]

    @Test func aHandshakeWaitsForTheHelloThenStepsUntilDoneThenOpens() {
        var machine = Machine(acceptedAt: 0, timeout: Self.timeout)
        #expect(machine.start == .wait(deadline: Self.at(30)))
        #expect(machine.received(Self.helloStart, now: Self.at(1)) == .step)
        #expect(machine.stepped(.inProgress, now: Self.at(1)) == .wait(deadline: Self.at(30)))
        #expect(machine.received([0x14, 0x03, 0x03], now: Self.at(2)) == .step)
        #expect(machine.stepped(.done, now: Self.at(2)) == .open)
        #expect(machine.phase == .open)
    }

    @Test func aHelloSplitIntoSingleBytesIsStillAHandshake() {
        var machine = Machine(acceptedAt: 0, timeout: Self.timeout)
        for byte in Self.helloStart {
            #expect(machine.received([byte], now: 0) == .step)
            #expect(machine.stepped(.inProgress, now: 0) == .wait(deadline: Self.at(30)))
        }
        #expect(machine.phase == .handshaking)
    }

    @Test(arguments: [
        Array("GET / HTTP/1.1\r\n".utf8), Array("POST /v1/push HTTP/1.1\r\n".utf8), [0x16, 0x47], [0x80, 0x2e],
    ])
    func bytesThatAreNotATLSHandshakeClose(_ bytes: [UInt8]) {
        var machine = Machine(acceptedAt: 0, timeout: Self.timeout)
        #expect(machine.received(bytes, now: Self.at(1)) == .close(.protocol))
        #expect(machine.phase == .closed)
    }

    @Test func plainHTTPSentAByteAtATimeClosesAtItsFirstByte() {
        var machine = Machine(acceptedAt: 0, timeout: Self.timeout)
        #expect(machine.received([UInt8(ascii: "G")], now: 0) == .close(.protocol))
    }

    @Test func aClientStalledMidHandshakeIsCutOffAtTheAcceptsDeadlineNotLater() {
        var machine = Machine(acceptedAt: Self.at(5), timeout: Self.timeout)
        #expect(machine.received(Self.helloStart, now: Self.at(6)) == .step)
        // Progress never extends the deadline: a record at 34 s still waits for 35 s.
        #expect(machine.stepped(.inProgress, now: Self.at(6)) == .wait(deadline: Self.at(35)))
        #expect(machine.received([0x16], now: Self.at(34)) == .step)
        #expect(machine.stepped(.inProgress, now: Self.at(34)) == .wait(deadline: Self.at(35)))
        // An early wake-up changes nothing.
        #expect(machine.deadlineReached(now: Self.at(34)) == .wait(deadline: Self.at(35)))
        #expect(machine.deadlineReached(now: Self.at(35)) == .close(.timeout))
        #expect(machine.phase == .closed)
    }

    @Test func aClientThatConnectsAndSendsNothingTimesOut() {
        var machine = Machine(acceptedAt: 0, timeout: Self.timeout)
        #expect(machine.deadlineReached(now: Self.at(30)) == .close(.timeout))
    }

    @Test func bytesArrivingAfterTheDeadlineDoNotRestartTheHandshake() {
        var machine = Machine(acceptedAt: 0, timeout: Self.timeout)
        #expect(machine.received(Self.helloStart, now: Self.at(31)) == .close(.timeout))
    }

    @Test func aStepThatEndsAfterTheDeadlineIsATimeout() {
        var machine = Machine(acceptedAt: 0, timeout: Self.timeout)
        #expect(machine.received(Self.helloStart, now: Self.at(29)) == .step)
        #expect(machine.stepped(.inProgress, now: Self.at(30)) == .close(.timeout))
    }

    @Test(arguments: [Machine.Failure.protocol, .alpn, .other])
    func aFailedStepClosesWithItsKind(_ failure: Machine.Failure) {
        var machine = Machine(acceptedAt: 0, timeout: Self.timeout)
        #expect(machine.received(Self.helloStart, now: 0) == .step)
        #expect(machine.stepped(.failed(failure), now: 0) == .close(failure))
    }

    @Test func aClientThatClosesPartWayFailsButAPortProbeDoesNotCount() {
        var started = Machine(acceptedAt: 0, timeout: Self.timeout)
        _ = started.received(Self.helloStart, now: 0)
        _ = started.stepped(.inProgress, now: 0)
        #expect(started.peerClosed() == .close(.other))
        var probe = Machine(acceptedAt: 0, timeout: Self.timeout)
        #expect(probe.peerClosed() == .close(nil))
    }

    /// A client still handshaking when the server stops connected before the stop: it may finish within the drain's
    /// wait (then its request is answered as a drain answers), and one that does not is closed without counting it.
    @Test func aStoppingServerLetsAHandshakeFinishWithinItsWaitAndClosesItUncountedAfter() {
        var finishing = Machine(acceptedAt: 0, timeout: Self.timeout)
        _ = finishing.received(Self.helloStart, now: 0)
        #expect(finishing.drain(now: 10, wait: 100) == .wait(deadline: 110))
        #expect(finishing.stepped(.done, now: 50) == .open)
        var stalled = Machine(acceptedAt: 0, timeout: Self.timeout)
        _ = stalled.received(Self.helloStart, now: 0)
        #expect(stalled.drain(now: 10, wait: 100) == .wait(deadline: 110))
        #expect(stalled.deadlineReached(now: 109) == .wait(deadline: 110))
        #expect(stalled.deadlineReached(now: 110) == .close(nil))
        #expect(stalled.phase == .closed)
        // The drain never lengthens a deadline that was sooner.
        var late = Machine(acceptedAt: 0, timeout: 50)
        #expect(late.drain(now: 10, wait: 100) == .wait(deadline: 50))
    }

    /// The handshake is part of the first request's deadline: the conversation, made at the accept, waits for its
    /// first request until the accept's deadline, however long the handshake took.
    @Test func theConversationAfterTheHandshakeKeepsTheAcceptsDeadline() {
        let configuration = HTTP1Connection.Configuration(timeout: Self.timeout)
        var conversation = HTTP1Conversation(configuration: configuration, now: 0)
        var machine = Machine(acceptedAt: 0, timeout: Self.timeout)
        _ = machine.received(Self.helloStart, now: Self.at(20))
        #expect(machine.stepped(.done, now: Self.at(20)) == .open)
        let first = conversation.start(draining: false, now: Self.at(20))
        #expect(first.deadline == Self.at(30))
        #expect(first.isReading)
        var action = first
        #expect(!conversation.actionDone(&action, now: Self.at(20)))
        let late = conversation.deadlineReached(now: Self.at(30))
        #expect(late?.close == true)
    }
}
