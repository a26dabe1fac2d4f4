import APNsSimulator
import Dispatch
import Foundation
import MonotonicTime
import Synchronization
import TLS
import Testing

import enum RelayCrypto.P256

@testable import EventLoops
@testable import OutboundConnections

/// What a stream told its delegate, recorded from the loop thread and waited for with a deadline.
enum StreamEvent: Sendable, Equatable {
    case connected(alpn: String?)
    case read([UInt8])
    case failed(ClientStreamFailure.Kind)
    case closed
}

final class StreamEvents: Sendable {
    private let events = Mutex<[StreamEvent]>([])
    private let signal = DispatchSemaphore(value: 0)

    func record(_ event: StreamEvent) {
        events.withLock { $0.append(event) }
        signal.signal()
    }

    var all: [StreamEvent] { events.withLock { $0 } }

    /// Every byte read so far, in order.
    var bytesRead: [UInt8] { Self.bytes(in: all) }

    static func bytes(in events: [StreamEvent]) -> [UInt8] {
        events.flatMap { event -> [UInt8] in
            if case .read(let bytes) = event { bytes } else { [] }
        }
    }

    @discardableResult
    func wait(seconds: Double = 10, until condition: ([StreamEvent]) -> Bool) -> Bool {
        let deadline = DispatchTime.now() + seconds
        while true {
            if events.withLock({ condition($0) }) { return true }
            if signal.wait(timeout: deadline) == .timedOut { return events.withLock { condition($0) } }
        }
    }
}

/// Records every delegate call; on connect, writes `greeting` if any.
final class RecordingStreamDelegate: ClientStreamDelegate {
    let events: StreamEvents
    let greeting: [UInt8]?
    init(events: StreamEvents, greeting: [UInt8]? = nil) {
        self.events = events
        self.greeting = greeting
    }
    func streamDidConnect(_ stream: ClientStream) {
        events.record(.connected(alpn: stream.negotiatedProtocol))
        if let greeting { stream.write(greeting) }
    }
    func stream(_ stream: ClientStream, didRead bytes: UnsafeRawBufferPointer) { events.record(.read(Array(bytes))) }
    func stream(_ stream: ClientStream, didFail failure: ClientStreamFailure) { events.record(.failed(failure.kind)) }
    func streamDidClose(_ stream: ClientStream) { events.record(.closed) }
}

/// An echo server on `loop` (closing each connection at once instead, with `closeAtOnce`).
final class EchoServerDelegate: TCPConnectionDelegate {
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) { connection.write(bytes) }
    func connectionDidReachEnd(_ connection: TCPConnection) { connection.close() }
    func connection(_ connection: TCPConnection, didFail error: LoopError) { connection.close() }
}

func startEchoServer(on loop: EventLoop, closeAtOnce: Bool = false) throws -> (LoopBound<TCPListener>, UInt16) {
    try loop.performAndWait {
        let listener = try TCPListener(on: loop, host: "127.0.0.1", port: 0) { connection in
            if closeAtOnce {
                connection.close()
                return
            }
            connection.delegate = EchoServerDelegate()
            connection.startReading()
        }
        return (LoopBound(listener, on: loop), listener.port)
    }
}

/// Opens a stream on `loop` and hands it back bound to the loop.
func openStream(
    on loop: EventLoop, host: String, port: UInt16, tls: ClientStream.TLS?, events: StreamEvents,
    greeting: [UInt8]? = nil
) throws -> LoopBound<ClientStream> {
    try loop.performAndWait {
        let delegate = RecordingStreamDelegate(events: events, greeting: greeting)
        return LoopBound(ClientStream.connect(on: loop, host: host, port: port, tls: tls, delegate: delegate), on: loop)
    }
}

/// What a TLS test of a stream needs: the simulator, a loop, and a client context offering h2 that trusts the
/// simulator's CA (or only the system's roots). `stop()` stops the loop, then the simulator.
struct TLSStreamSetup {
    let fixture: SimulatorFixture
    let loop: EventLoop
    let context: TLSClientContext

    init(trustingItsCA: Bool = true) throws {
        let fixture = try SimulatorFixture()
        do {
            loop = try EventLoop(name: "test-stream")
        } catch {
            fixture.stop()
            throw error
        }
        self.fixture = fixture
        do {
            context = try TLSClientContext(extraCAFile: trustingItsCA ? fixture.caFile : nil, alpn: ["h2"])
        } catch {
            loop.stop()
            fixture.stop()
            throw error
        }
    }

    func stop() {
        loop.stop()
        fixture.stop()
    }
}

/// The simulator over TLS with its own CA, and a client context that trusts that CA (or not).
struct SimulatorFixture {
    let simulator: APNsSimulator
    let caFile: String

    init() throws {
        let pki = try SimulatorPKI.generate()
        let key = P256.Signing.PrivateKey()
        simulator = try APNsSimulator(
            configuration: SimulatorConfiguration(
                certificatePEM: pki.certificatePEM, privateKeyPEM: pki.privateKeyPEM, teamID: "TEAM123456",
                keys: ["KEY1234567": key.publicKey], topics: ["app.example"]))
        caFile = NSTemporaryDirectory() + "looptls-ca-\(UUID().uuidString).pem"
        try pki.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
    }

    func stop() {
        simulator.stop()
        try? FileManager.default.removeItem(atPath: caFile)
    }
}

@Suite(.serialized) struct ClientStreamTests {
    @Test func plainStreamEchoesAndClosesGracefully() throws {
        let loop = try EventLoop(name: "test-stream")
        defer { loop.stop() }
        let (_, port) = try startEchoServer(on: loop)
        let events = StreamEvents()
        let message = Array("hello, loop".utf8)
        let stream = try openStream(
            on: loop, host: "127.0.0.1", port: port, tls: nil,
            events: events, greeting: message)
        #expect(events.wait { StreamEvents.bytes(in: $0).count >= message.count })
        #expect(events.bytesRead == message)
        try loop.performAndWait { stream.value.close() }
        #expect(events.wait { $0.contains(.closed) })
        #expect(events.all.first == .connected(alpn: nil))
        #expect(!events.all.contains { if case .failed = $0 { true } else { false } })
    }

    @Test func writesMadeBeforeTheConnectionAreSentOnceItIsOpen() throws {
        let loop = try EventLoop(name: "test-stream")
        defer { loop.stop() }
        let (_, port) = try startEchoServer(on: loop)
        let events = StreamEvents()
        let stream = try openStream(
            on: loop, host: "127.0.0.1", port: port, tls: nil, events: events)
        try loop.performAndWait {
            stream.value.write(Array("early ".utf8))
            stream.value.write(Array("bytes".utf8))
        }
        #expect(events.wait { StreamEvents.bytes(in: $0).count >= 11 })
        #expect(events.bytesRead == Array("early bytes".utf8))
    }

    @Test func aRefusedConnectionFailsAsConnect() throws {
        let loop = try EventLoop(name: "test-stream")
        defer { loop.stop() }
        // A port that was just free: nothing listens there.
        let (listener, port) = try startEchoServer(on: loop)
        try loop.performAndWait { listener.value.close() }
        let events = StreamEvents()
        _ = try openStream(
            on: loop, host: "127.0.0.1", port: port, tls: nil, events: events)
        #expect(events.wait { $0.contains(.closed) })
        #expect(events.all == [.failed(.connect), .closed])
    }

    @Test func aPeerThatClosesIsReported() throws {
        let loop = try EventLoop(name: "test-stream")
        defer { loop.stop() }
        let (_, port) = try startEchoServer(on: loop, closeAtOnce: true)
        let events = StreamEvents()
        _ = try openStream(
            on: loop, host: "127.0.0.1", port: port, tls: nil, events: events)
        #expect(events.wait { $0.contains(.closed) })
        #expect(events.all.first == .connected(alpn: nil))
        #expect(events.all.contains(.failed(.closedByPeer)) || events.all.contains(.failed(.reset)))
    }

    @Test func aResetWhileConnectingIsOnlyAClose() throws {
        let loop = try EventLoop(name: "test-stream")
        defer { loop.stop() }
        let (_, port) = try startEchoServer(on: loop)
        let events = StreamEvents()
        try loop.performAndWait {
            let stream = ClientStream.connect(
                on: loop, host: "127.0.0.1", port: port, tls: nil, delegate: RecordingStreamDelegate(events: events))
            stream.reset()
        }
        #expect(events.wait { $0.contains(.closed) })
        #expect(events.all == [.closed])
    }

    @Test func tlsHandshakesAgreesOnH2AndCarriesData() throws {
        let setup = try TLSStreamSetup()
        defer { setup.stop() }
        let (fixture, loop, context) = (setup.fixture, setup.loop, setup.context)
        let events = StreamEvents()
        // The HTTP/2 preface and an empty SETTINGS frame: the server answers with its own SETTINGS (type 4).
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0]
        // "localhost" goes through the resolver; the simulator listens on 127.0.0.1 only, so an ::1 first
        // in the answer is refused and the next address is tried.
        _ = try openStream(
            on: loop, host: "localhost", port: fixture.simulator.port,
            tls: ClientStream.TLS(context: context, serverName: "localhost"),
            events: events, greeting: preface)
        #expect(events.wait { StreamEvents.bytes(in: $0).count >= 9 })
        #expect(events.all.first == .connected(alpn: "h2"))
        #expect(events.bytesRead.count >= 9 && events.bytesRead[3] == 4)
    }

    @Test func aTLSWriteOfSeveralRecordsArrivesWhole() throws {
        let setup = try TLSStreamSetup()
        defer { setup.stop() }
        let (fixture, loop, context) = (setup.fixture, setup.loop, setup.context)
        let events = StreamEvents()
        // One write of more than one TLS record (16 KiB of plaintext): the preface, an empty SETTINGS frame and
        // 980 PING frames (17 bytes each), each with its number as its data. The server answers every PING it
        // reads whole with a PING ACK carrying the same data (nghttp2 lets at most 1,000 acknowledgements queue).
        let pings = 980
        var bytes = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        bytes += [0, 0, 0, 4, 0, 0, 0, 0, 0]
        for number in 0..<pings {
            bytes += [0, 0, 8, 6, 0, 0, 0, 0, 0] + withUnsafeBytes(of: UInt64(number).bigEndian) { Array($0) }
        }
        #expect(bytes.count > 16 * 1024)
        _ = try openStream(
            on: loop, host: "127.0.0.1", port: fixture.simulator.port,
            tls: ClientStream.TLS(context: context, serverName: "127.0.0.1"), events: events, greeting: bytes)
        #expect(events.wait { Self.pingAcknowledgements(in: StreamEvents.bytes(in: $0)).count >= pings })
        let acknowledged = Self.pingAcknowledgements(in: events.bytesRead)
        #expect(acknowledged == Array(0..<UInt64(pings)), "\(acknowledged.count) acknowledged")
        #expect(!events.all.contains { if case .failed = $0 { true } else { false } })
    }

    /// The data of the PING ACK frames among the whole frames of `bytes`, in order.
    static func pingAcknowledgements(in bytes: [UInt8]) -> [UInt64] {
        var index = 0
        var numbers: [UInt64] = []
        while index + 9 <= bytes.count {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            guard index + 9 + length <= bytes.count else { break }
            if bytes[index + 3] == 6 && bytes[index + 4] & 1 == 1 && length == 8 {
                numbers.append(bytes[index + 9..<index + 17].reduce(0) { $0 << 8 | UInt64($1) })
            }
            index += 9 + length
        }
        return numbers
    }

    @Test func tlsOnAnIPLiteralChecksTheCertificatesAddress() throws {
        let setup = try TLSStreamSetup()
        defer { setup.stop() }
        let (fixture, loop, context) = (setup.fixture, setup.loop, setup.context)
        let events = StreamEvents()
        let stream = try openStream(
            on: loop, host: "127.0.0.1", port: fixture.simulator.port,
            tls: ClientStream.TLS(context: context, serverName: "127.0.0.1"),
            events: events)
        #expect(events.wait { !$0.isEmpty })
        #expect(events.all.first == .connected(alpn: "h2"))
        try loop.performAndWait { stream.value.close() }
        #expect(events.wait { $0.contains(.closed) })
        #expect(!events.all.contains { if case .failed = $0 { true } else { false } })
    }

    @Test(arguments: [(trusted: false, name: "localhost"), (trusted: true, name: "other.example")])
    func anUntrustedCertificateOrAnotherNameFailsAsCertificate(trusted: Bool, name: String) throws {
        let setup = try TLSStreamSetup(trustingItsCA: trusted)
        defer { setup.stop() }
        let (fixture, loop, context) = (setup.fixture, setup.loop, setup.context)
        let events = StreamEvents()
        _ = try openStream(
            on: loop, host: "127.0.0.1", port: fixture.simulator.port,
            tls: ClientStream.TLS(context: context, serverName: name), events: events)
        #expect(events.wait { $0.contains(.closed) })
        #expect(events.all == [.failed(.certificate), .closed])
    }

    @Test func aNameThatDoesNotResolveFailsAsResolve() throws {
        let loop = try EventLoop(name: "test-stream")
        defer { loop.stop() }
        let events = StreamEvents()
        // A syntactically impossible host name: the resolver refuses it without asking any server.
        _ = try openStream(
            on: loop, host: "no such host", port: 443, tls: nil, events: events)
        #expect(events.wait(seconds: 30) { $0.contains(.closed) })
        #expect(events.all == [.failed(.resolve), .closed])
    }
}

/// Values recorded on the loop thread and read by the test.
final class Recorded<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
}

/// A one-connection HTTP proxy on the test's loop: reads the request head, records it, answers `answer` in one write
/// (with whatever the "server" sends right after the answer), then echoes what comes next.
final class ScriptedProxyDelegate: TCPConnectionDelegate {
    let answer: [UInt8]
    let heads: Recorded<String>
    private var head: [UInt8] = []
    private var answered = false

    init(answer: [UInt8], heads: Recorded<String>) {
        self.answer = answer
        self.heads = heads
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        guard !answered else {
            _ = connection.write(bytes)
            return
        }
        head += bytes
        guard let end = head.indices.dropLast(3).first(where: { head[$0..<$0 + 4].elementsEqual([13, 10, 13, 10]) })
        else { return }
        answered = true
        let text = String(decoding: head[..<(end + 4)], as: UTF8.self)
        heads.append(text)
        _ = connection.write(answer)
        if head.count > end + 4 { _ = connection.write(Array(head[(end + 4)...])) }
    }
    func connectionDidReachEnd(_ connection: TCPConnection) { connection.close() }
    func connection(_ connection: TCPConnection, didFail error: LoopError) { connection.close() }
}

extension ClientStreamTests {
    private func startScriptedProxy(on loop: EventLoop, answer: String, heads: Recorded<String>) throws -> (
        LoopBound<TCPListener>, UInt16
    ) {
        try loop.performAndWait {
            let listener = try TCPListener(on: loop, host: "127.0.0.1", port: 0) { connection in
                connection.delegate = ScriptedProxyDelegate(answer: Array(answer.utf8), heads: heads)
                connection.startReading()
            }
            return (LoopBound(listener, on: loop), listener.port)
        }
    }

    @Test func throughAProxyTheStreamAsksForATunnelByNameAndReadsWhatFollowsTheAnswer() throws {
        let loop = try EventLoop(name: "test-stream")
        defer { loop.stop() }
        let heads = Recorded<String>()
        // The "server" behind the proxy speaks first, in the proxy's answer's write: its bytes go to the owner.
        let (_, port) = try startScriptedProxy(
            on: loop, answer: "HTTP/1.1 200 Connection established\r\nVia: test\r\n\r\n+OK ready\r\n", heads: heads)
        let events = StreamEvents()
        let proxy = ClientStream.Proxy(host: "127.0.0.1", port: port, authorization: "Basic cmVsYXk6cGFzcw==")
        let stream = try loop.performAndWait {
            LoopBound(
                ClientStream.connect(
                    on: loop, host: "redis.internal", port: 6379, tls: nil, proxy: proxy,
                    deadline: EventLoop.monotonicNow() + 5_000_000_000,
                    delegate: RecordingStreamDelegate(events: events, greeting: Array("PING\r\n".utf8))),
                on: loop)
        }
        #expect(events.wait { StreamEvents.bytes(in: $0).count >= 16 })
        #expect(events.all.first == .connected(alpn: nil))
        #expect(events.bytesRead == Array("+OK ready\r\nPING\r\n".utf8))
        #expect(
            heads.all == [
                "CONNECT redis.internal:6379 HTTP/1.1\r\nHost: redis.internal:6379\r\n"
                    + "Proxy-Authorization: Basic cmVsYXk6cGFzcw==\r\n\r\n"
            ])
        try loop.performAndWait { stream.value.close() }
        #expect(events.wait { $0.contains(.closed) })
    }

    @Test func aProxyThatRefusesTheTunnelFailsTheStreamOnce() throws {
        let loop = try EventLoop(name: "test-stream")
        defer { loop.stop() }
        let heads = Recorded<String>()
        let (_, port) = try startScriptedProxy(
            on: loop, answer: "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", heads: heads)
        let failures = Recorded<ClientStreamFailure>()
        final class Delegate: ClientStreamDelegate {
            let events: StreamEvents
            let failures: Recorded<ClientStreamFailure>
            init(events: StreamEvents, failures: Recorded<ClientStreamFailure>) {
                self.events = events
                self.failures = failures
            }
            func streamDidConnect(_ stream: ClientStream) { events.record(.connected(alpn: nil)) }
            func stream(_ stream: ClientStream, didRead bytes: UnsafeRawBufferPointer) {}
            func stream(_ stream: ClientStream, didFail failure: ClientStreamFailure) {
                failures.append(failure)
                events.record(.failed(failure.kind))
            }
            func streamDidClose(_ stream: ClientStream) { events.record(.closed) }
        }
        let events = StreamEvents()
        try loop.performAndWait {
            _ = ClientStream.connect(
                on: loop, host: "api.push.apple.com", port: 443, tls: nil,
                proxy: ClientStream.Proxy(host: "127.0.0.1", port: port), deadline: nil,
                delegate: Delegate(events: events, failures: failures))
        }
        #expect(events.wait { $0.contains(.closed) })
        #expect(events.all == [.failed(.connect), .closed])
        let failure = try #require(failures.all.first)
        #expect(failure.tunnel == .refused)
        #expect(failure.reason == "proxy 127.0.0.1:\(port) refused the tunnel: 403 Forbidden")
    }
}
