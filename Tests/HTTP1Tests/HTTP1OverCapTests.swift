import HTTP1
import MonotonicTime
import Testing

/// A connection accepted over a cap, driven alone with a test clock (docs/DESIGN.md, "The HTTP front", Caps): it
/// waits for its head at most a second from its accept, holds a small fixed buffer, asks for room once the head is in
/// and waits a short while for it, and without room is answered 503 `overloaded` with `Retry-After` and
/// `connection: close` by the machine itself, then closes lingering (never a reset).
@Suite("HTTP/1.1 connection over a cap")
struct HTTP1OverCapTests {
    static let second: UInt64 = 1_000_000_000
    static let millisecond: UInt64 = 1_000_000

    struct Harness {
        var connection: HTTP1Connection
        var now = Instant(nanoseconds: 7 * second)
        let accepted: Instant
        var written: [UInt8] = []

        init(_ configure: (inout HTTP1Connection.Configuration) -> Void = { _ in }) {
            var configuration = HTTP1Connection.Configuration(timeout: 10 * HTTP1OverCapTests.second)
            configure(&configuration)
            accepted = now
            connection = HTTP1Connection(configuration: configuration, now: now, overCap: true)
        }

        mutating func record(_ action: HTTP1Connection.Action) -> HTTP1Connection.Action {
            if let bytes = action.write { written += bytes }
            return action
        }

        @discardableResult
        mutating func receive(_ text: String) -> HTTP1Connection.Action {
            let bytes = Array(text.utf8)
            return bytes.withUnsafeBytes { buffer in record(connection.received(buffer, now: now)) }
        }

        @discardableResult
        mutating func admission(room: Bool) -> HTTP1Connection.Action {
            record(connection.admission(room: room, now: now))
        }

        @discardableResult
        mutating func writeFinished() -> HTTP1Connection.Action {
            record(connection.writeFinished(now: now))
        }

        @discardableResult
        mutating func fire(at instant: Instant) -> HTTP1Connection.Action {
            now = instant
            return record(connection.deadlineReached(now: now))
        }

        mutating func takeWritten() -> String {
            defer { written = [] }
            return String(decoding: written, as: UTF8.self)
        }
    }

    static let get = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"

    /// The answer a refused client reads: 503, the relay's JSON `overloaded`, `Retry-After` and `connection: close`.
    static func expectOverloaded(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(text.hasPrefix("HTTP/1.1 503 "), sourceLocation: sourceLocation)
        #expect(text.contains("\r\nretry-after: 1\r\n"), sourceLocation: sourceLocation)
        #expect(text.contains("\r\nconnection: close\r\n"), sourceLocation: sourceLocation)
        #expect(text.contains("\r\ncontent-type: application/json\r\n"), sourceLocation: sourceLocation)
        #expect(
            text.hasSuffix(#"{"error":"overloaded","detail":"too many connections; nothing was processed"}"#),
            sourceLocation: sourceLocation)
    }

    @Test func theHeadMustComeWithinASecondOfTheAccept() {
        var harness = Harness()
        #expect(!harness.connection.admitted)
        #expect(harness.connection.current.isReading)
        #expect(harness.connection.current.deadline == harness.accepted + Self.second)
        // A first byte does not restart the wait, as it would on a counted connection.
        harness.now = harness.accepted + 600 * Self.millisecond
        #expect(harness.receive("GET /hel").deadline == harness.accepted + Self.second)
        let closed = harness.fire(at: harness.accepted + Self.second)
        #expect(closed.close)
        #expect(harness.takeWritten().isEmpty)
    }

    @Test func withoutRoomTheHeadIsAnswered503AfterTheRoomWait() {
        var harness = Harness()
        harness.now = harness.accepted + 10 * Self.millisecond
        let asked = harness.receive(Self.get)
        #expect(asked.handUp == .admission)
        #expect(!asked.isReading)
        #expect(asked.deadline == nil)
        let waiting = harness.admission(room: false)
        #expect(harness.connection.isAwaitingRoom)
        #expect(waiting.write == nil)
        #expect(waiting.deadline == harness.now + 250 * Self.millisecond)
        // Asked again without room: the wait does not start over.
        let asking = harness.now
        harness.now = asking + 100 * Self.millisecond
        #expect(harness.admission(room: false).deadline == asking + 250 * Self.millisecond)
        let refused = harness.fire(at: asking + 250 * Self.millisecond)
        #expect(!refused.close)
        #expect(!harness.connection.isAwaitingRoom)
        Self.expectOverloaded(harness.takeWritten())
        // Then a lingering close: the write side shut, what comes read and dropped, closed at the linger's end.
        let lingering = harness.writeFinished()
        #expect(lingering.shutdownWrite)
        #expect(lingering.isReading)
        #expect(!harness.receive("POST /v1/push HTTP/1.1\r\n").close)
        #expect(harness.fire(at: harness.now + 2 * Self.second).close)
        #expect(!harness.connection.admitted)
    }

    @Test func roomFoundServesTheRequestAsOnAnyConnection() {
        var harness = Harness()
        #expect(harness.receive(Self.get).handUp == .admission)
        #expect(harness.admission(room: false).write == nil)
        harness.now = harness.now + 30 * Self.millisecond
        let admitted = harness.admission(room: true)
        #expect(harness.connection.admitted)
        guard case .head(let head)? = admitted.handUp else {
            Issue.record("no head handed up")
            return
        }
        #expect(head.path == "/hello")
        _ = harness.record(harness.connection.respond(.json(200, "{}"), now: harness.now))
        #expect(harness.takeWritten().hasPrefix("HTTP/1.1 200 "))
        // Kept alive, with a counted connection's deadlines from here.
        let idle = harness.writeFinished()
        #expect(!idle.close)
        #expect(idle.deadline == harness.now + 10 * Self.second)
        #expect(harness.receive(Self.get).handUp == .head(head))
    }

    @Test func roomAtOnceServesTheRequestWithoutWaiting() {
        var harness = Harness()
        #expect(harness.receive(Self.get).handUp == .admission)
        guard case .head? = harness.admission(room: true).handUp else {
            Issue.record("no head handed up")
            return
        }
        #expect(harness.takeWritten().isEmpty)
    }

    /// The connection holds at most its small buffer: a head longer than that asks for room when the buffer is
    /// full, and reading stops there.
    @Test func aLongHeadAsksForRoomOnceTheBufferIsFull() {
        var harness = Harness { $0.overCapBufferBytes = 64 }
        let long = "GET /hello HTTP/1.1\r\nHost: x\r\nx-padding: " + String(repeating: "a", count: 100) + "\r\n\r\n"
        let start = String(long.prefix(40))
        #expect(harness.receive(start).isReading)
        let full = harness.receive(String(long.dropFirst(40).prefix(30)))
        #expect(full.handUp == .admission)
        #expect(!full.isReading)
        // With room, the rest of the head is read as on any connection.
        let admitted = harness.admission(room: true)
        #expect(admitted.isReading)
        guard case .head(let head)? = harness.receive(String(long.dropFirst(70))).handUp else {
            Issue.record("no head handed up")
            return
        }
        #expect(head.path == "/hello")
    }

    /// One read may bring more than the buffer holds: without room, the connection is refused at once rather than
    /// keep those bytes while it waits.
    @Test func moreThanTheBufferIsRefusedAtOnceWithoutRoom() {
        var harness = Harness { $0.overCapBufferBytes = 64 }
        let body = String(repeating: "b", count: 200)
        let request = "POST /v1/push HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n" + body
        #expect(harness.receive(request).handUp == .admission)
        let refused = harness.admission(room: false)
        #expect(refused.write != nil)
        Self.expectOverloaded(harness.takeWritten())
    }

    /// A head the parser refuses is still answered 503 without room (nothing was processed), and with room gets its
    /// own refusal from the handler.
    @Test func aMalformedHeadOverTheCap() {
        var harness = Harness()
        #expect(harness.receive("GET /hello HTTP/1.1\r\nHost x\r\n\r\n").handUp == .admission)
        guard case .refused(_, let error, followsHead: false)? = harness.admission(room: true).handUp else {
            Issue.record("no refusal handed up")
            return
        }
        #expect(error.status == 400)

        var refused = Harness()
        #expect(refused.receive("GET /hello HTTP/1.1\r\nHost x\r\n\r\n").handUp == .admission)
        refused.admission(room: false)
        refused.fire(at: refused.now + 250 * Self.millisecond)
        Self.expectOverloaded(refused.takeWritten())
    }

    @Test func aStoppingServerAnswersAWaitingConnection503() {
        var harness = Harness()
        harness.receive(Self.get)
        harness.admission(room: false)
        let drained = harness.record(harness.connection.drain(now: harness.now))
        #expect(drained.write != nil)
        Self.expectOverloaded(harness.takeWritten())
    }

    @Test func aClientGoneBeforeItsHeadIsClosedUnanswered() {
        var harness = Harness()
        harness.receive("GET /hel")
        #expect(harness.record(harness.connection.peerClosed(now: harness.now)).close)
        #expect(harness.takeWritten().isEmpty)
    }

    /// A client that sends its request and half-closes still reads its answer.
    @Test func aHalfClosedClientStillGetsItsAnswer() {
        var harness = Harness()
        harness.receive(Self.get)
        #expect(!harness.record(harness.connection.peerClosed(now: harness.now)).close)
        harness.admission(room: false)
        harness.fire(at: harness.now + 250 * Self.millisecond)
        Self.expectOverloaded(harness.takeWritten())
        #expect(harness.writeFinished().close)
    }
}
