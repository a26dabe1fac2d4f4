import Dispatch
import Glibc
import RelayTestSupport
import Synchronization
import Testing

@testable import EventLoops

/// What a test server's connection saw, recorded from the loop thread.
enum ConnectionEvent: Sendable, Equatable {
    case accepted(peer: IPAddress?, port: UInt16)
    case read([UInt8])
    case end
    case failed(LoopError.Code)
    case finishedWriting
    case closed
}

/// A server-side delegate: records everything, echoes what it reads when asked to.
final class RecordingDelegate: TCPConnectionDelegate {
    let events: Recorder<ConnectionEvent>
    let echo: Bool
    init(events: Recorder<ConnectionEvent>, echo: Bool) {
        self.events = events
        self.echo = echo
    }
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        events.record(.read(Array(bytes)))
        if echo { connection.write(bytes) }
    }
    func connectionDidReachEnd(_ connection: TCPConnection) {
        events.record(.end)
        // Half-closed by the peer: an answer still reaches it, then our side closes.
        connection.write(Array("bye".utf8))
        connection.shutdownOutput()
    }
    func connection(_ connection: TCPConnection, didFail error: LoopError) {
        events.record(.failed(error.code))
        connection.close()
    }
    func connectionDidFinishWriting(_ connection: TCPConnection) { events.record(.finishedWriting) }
    func connectionDidClose(_ connection: TCPConnection) { events.record(.closed) }
}

/// Opens a listener on `loop` whose connections get a recording delegate; returns the listener and its port.
func startServer(
    on loop: EventLoop, host: String = "127.0.0.1", port: UInt16 = 0, events: Recorder<ConnectionEvent>,
    echo: Bool = true, accepted: (@Sendable (TCPConnection) -> Void)? = nil
) throws -> (LoopBound<TCPListener>, UInt16) {
    try loop.performAndWait {
        let listener = try TCPListener(on: loop, host: host, port: port) { connection in
            events.record(.accepted(peer: connection.peerAddress, port: connection.peerPort))
            connection.delegate = RecordingDelegate(events: events, echo: echo)
            connection.startReading()
            accepted?(connection)
        }
        return (LoopBound(listener, on: loop), listener.port)
    }
}

/// Bytes that differ from their neighbours, so that a lost, repeated or reordered part shows.
func pattern(count: Int) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
        for index in 0..<count { buffer[index] = UInt8(truncatingIfNeeded: index &* 31 &+ index >> 8) }
        initialized = count
    }
}

extension EventLoopsSuite {
    @Suite struct TCPTests {
        @Test(arguments: ["127.0.0.1", "::1"])
        func echoesAndKnowsItsPeer(host: String) throws {
            let loop = try EventLoop(name: "test-echo")
            defer { loop.stop() }
            let events = Recorder<ConnectionEvent>()
            let (_, port) = try startServer(on: loop, host: host, events: events)
            let client = try TestClient(port: port, ipv6: host == "::1")
            try client.send("hello")
            #expect(try client.receive(count: 5) == Array("hello".utf8))
            #expect(events.all.first == .accepted(peer: IPAddress(host), port: client.localPort))
        }

        @Test func twoPartsGoOutInOneWrite() throws {
            let loop = try EventLoop(name: "test-parts")
            defer { loop.stop() }
            let results = Recorder<Bool>()
            let (_, port) = try startServer(on: loop, events: Recorder(), echo: false) { connection in
                let head = Array("head,".utf8)
                let body = Array("body".utf8)
                let written = head.withUnsafeBytes { head in
                    body.withUnsafeBytes { body in connection.write(head, body) }
                }
                results.record(written)
            }
            let client = try TestClient(port: port)
            #expect(try client.receive(count: 9) == Array("head,body".utf8))
            #expect(results.wait { !$0.isEmpty })
            #expect(results.all == [true])
        }

        @Test func endOfInputIsNotAnErrorAndTheAnswerStillGoesOut() throws {
            let loop = try EventLoop(name: "test-eof")
            defer { loop.stop() }
            let events = Recorder<ConnectionEvent>()
            let (_, port) = try startServer(on: loop, events: events, echo: false)
            let client = try TestClient(port: port)
            try client.send("request")
            client.shutdownOutput()
            #expect(try client.receive(count: 3) == Array("bye".utf8))
            #expect(client.readsEndOfInput())
            #expect(events.wait { $0.contains(.end) })
            #expect(!events.all.contains { if case .failed = $0 { true } else { false } })
        }

        @Test func aResetIsAnError() throws {
            let loop = try EventLoop(name: "test-reset")
            defer { loop.stop() }
            let events = Recorder<ConnectionEvent>()
            let (_, port) = try startServer(on: loop, events: events, echo: false)
            let client = try TestClient(port: port)
            try client.send("x")
            #expect(events.wait { $0.contains(.read(Array("x".utf8))) })
            client.resetOnClose()
            _ = consume client
            #expect(events.wait { $0.contains(.closed) })
            #expect(events.all.contains(.failed(.connectionReset)))
            #expect(!events.all.contains(.end))
        }

        @Test func aWriteLargerThanTheSocketBufferIsQueuedAndCompletes() throws {
            let loop = try EventLoop(name: "test-large")
            defer { loop.stop() }
            let events = Recorder<ConnectionEvent>()
            let size = 8 * 1024 * 1024
            let payload = pattern(count: size)
            let writtenAtOnce = Recorder<Bool>()
            let (_, port) = try startServer(on: loop, events: events, echo: false) { connection in
                // In two parts, so that the queue starts inside the first and carries the second whole.
                let split = 3 * 1024 * 1024
                let written = payload.withUnsafeBytes { bytes in
                    connection.write(
                        UnsafeRawBufferPointer(rebasing: bytes[..<split]),
                        UnsafeRawBufferPointer(rebasing: bytes[split...]))
                }
                writtenAtOnce.record(written)
                writtenAtOnce.record(connection.queuedByteCount > 0)
            }
            let client = try TestClient(port: port)
            #expect(writtenAtOnce.wait { $0.count == 2 })
            #expect(writtenAtOnce.all == [false, true])
            #expect(!events.all.contains(.finishedWriting))
            // A slow reader: small reads, so the queue drains over many turns of the loop.
            let received = try client.receive(count: size, chunk: 4096)
            #expect(received.count == size)
            #expect(received == payload)
            #expect(events.wait { $0.contains(.finishedWriting) })
        }

        @Test func twoLoopsShareOnePortAndOneStopsAccepting() throws {
            let first = try EventLoop(name: "test-share1")
            let second = try EventLoop(name: "test-share2")
            defer {
                first.stop()
                second.stop()
            }
            let firstEvents = Recorder<ConnectionEvent>()
            let secondEvents = Recorder<ConnectionEvent>()
            let (firstListener, port) = try startServer(on: first, events: firstEvents)
            _ = try startServer(on: second, port: port, events: secondEvents)
            var clients: [TestClient] = []
            for _ in 0..<40 {
                let client = try TestClient(port: port)
                try client.send("a")
                _ = try client.receive(count: 1)
                clients.append(client)
            }
            let accepted = { (events: Recorder<ConnectionEvent>) in
                events.all.filter { if case .accepted = $0 { true } else { false } }.count
            }
            #expect(accepted(firstEvents) + accepted(secondEvents) == 40)
            #expect(accepted(firstEvents) > 0)
            #expect(accepted(secondEvents) > 0)

            try first.performAndWait { firstListener.value.stopAccepting() }
            let before = accepted(firstEvents)
            for _ in 0..<20 {
                let client = try TestClient(port: port)
                try client.send("b")
                #expect(try client.receive(count: 1) == Array("b".utf8))
                clients.append(client)
            }
            #expect(accepted(firstEvents) == before)
            #expect(accepted(secondEvents) == 60 - before)
            // The first loop's connections outlived its listener.
            try clients[0].send("c")
            #expect(try clients[0].receive(count: 1) == Array("c".utf8))
        }

        @Test func listensOnSocketsMadeOnAnotherThread() throws {
            let loop = try EventLoop(name: "test-adopt")
            defer { loop.stop() }
            // As a test in a network namespace does: sockets made on its own thread, then handed to the loop.
            let first = try TCPListener.bindSocket(host: "127.0.0.1", port: 0)
            let second = try TCPListener.bindSocket(host: "127.0.0.1", port: first.port)
            #expect(second.port == first.port)
            let events = Recorder<ConnectionEvent>()
            let ports = try loop.performAndWait { () -> [UInt16] in
                try [first.descriptor, second.descriptor].map { descriptor in
                    try TCPListener(on: loop, adopting: descriptor) { connection in
                        events.record(.accepted(peer: connection.peerAddress, port: connection.peerPort))
                        connection.delegate = RecordingDelegate(events: events, echo: true)
                        connection.startReading()
                    }.port
                }
            }
            #expect(ports == [first.port, first.port])
            let client = try TestClient(port: first.port)
            try client.send("adopted")
            #expect(try client.receive(count: 7) == Array("adopted".utf8))
        }

        @Test func aConnectionAcceptedElsewhereIsAdopted() throws {
            let loop = try EventLoop(name: "test-adopt-conn")
            defer { loop.stop() }
            // One listener without SO_REUSEPORT, accepted on this thread, the socket handed to the loop.
            let socket = try TCPListener.bindSocket(host: "127.0.0.1", port: 0, sharingPort: false)
            defer { close(socket.descriptor) }
            #expect(listen(socket.descriptor, 8) == 0)
            #expect(throws: LoopError(.listenFailed, "")) {
                _ = try TCPListener.bindSocket(host: "127.0.0.1", port: socket.port)
            }
            let client = try TestClient(port: socket.port)
            var accepted: Int32 = -1
            for _ in 0..<1_000 {
                accepted = accept(socket.descriptor, nil, nil)
                if accepted >= 0 { break }
                var ready = pollfd(fd: socket.descriptor, events: Int16(POLLIN), revents: 0)
                _ = poll(&ready, 1, 10)
            }
            #expect(accepted >= 0)
            let events = Recorder<ConnectionEvent>()
            try loop.performAndWait { [accepted] in
                let connection = try TCPConnection.adopt(accepted, on: loop)
                events.record(.accepted(peer: connection.peerAddress, port: connection.peerPort))
                connection.delegate = RecordingDelegate(events: events, echo: true)
                connection.startReading()
            }
            try client.send("handed over")
            #expect(try client.receive(count: 11) == Array("handed over".utf8))
            #expect(events.all.first == .accepted(peer: IPAddress("127.0.0.1"), port: client.localPort))
        }

        @Test func connectsOutToAnotherLoop() throws {
            let server = try EventLoop(name: "test-server")
            let client = try EventLoop(name: "test-client")
            defer {
                client.stop()
                server.stop()
            }
            let serverEvents = Recorder<ConnectionEvent>()
            let (_, port) = try startServer(on: server, events: serverEvents)
            let clientEvents = Recorder<ConnectionEvent>()
            final class Client: TCPConnectionDelegate {
                let events: Recorder<ConnectionEvent>
                init(events: Recorder<ConnectionEvent>) { self.events = events }
                func connectionDidConnect(_ connection: TCPConnection) {
                    events.record(.accepted(peer: connection.peerAddress, port: connection.peerPort))
                    connection.startReading()
                }
                func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
                    events.record(.read(Array(bytes)))
                    connection.close()
                }
                func connectionDidReachEnd(_ connection: TCPConnection) { events.record(.end) }
                func connection(_ connection: TCPConnection, didFail error: LoopError) {
                    events.record(.failed(error.code))
                    connection.close()
                }
                func connectionDidClose(_ connection: TCPConnection) { events.record(.closed) }
            }
            try client.performAndWait {
                let connection = try TCPConnection.connect(
                    on: client, host: "127.0.0.1", port: port, delegate: Client(events: clientEvents))
                // Written before the connection is up: queued, then sent.
                connection.write(Array("ping".utf8))
            }
            #expect(clientEvents.wait { $0.contains(.closed) })
            #expect(
                clientEvents.all == [
                    .accepted(peer: IPAddress("127.0.0.1"), port: port), .read(Array("ping".utf8)), .closed,
                ])

            // A refused connection is a connect failure.
            let refused = Recorder<ConnectionEvent>()
            let (closedListener, closedPort) = try startServer(on: server, events: Recorder())
            try server.performAndWait { closedListener.value.close() }
            try client.performAndWait {
                _ = try TCPConnection.connect(
                    on: client, host: "127.0.0.1", port: closedPort, delegate: Client(events: refused))
            }
            #expect(refused.wait { $0.contains(.closed) })
            #expect(refused.all == [.failed(.connectFailed), .closed])
        }

        @Test func listeningOnAnInvalidOrTakenAddressThrows() throws {
            let loop = try EventLoop(name: "test-bad")
            defer { loop.stop() }
            #expect(throws: LoopError(.invalidAddress, "")) {
                _ = try startServer(on: loop, host: "localhost", events: Recorder())
            }
            // A port bound without SO_REUSEPORT by someone else cannot be shared.
            let other = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(other) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(other, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            _ = listen(other, 1)
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(other, $0, &length) }
            }
            #expect(throws: LoopError(.listenFailed, "")) {
                _ = try startServer(on: loop, port: UInt16(bigEndian: address.sin_port), events: Recorder())
            }
            #expect(try loop.performAndWait { loop.openHandles } == 0)
        }
    }
}
