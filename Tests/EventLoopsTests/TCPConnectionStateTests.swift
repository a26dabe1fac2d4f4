import Dispatch
import Glibc
import RelayTestSupport
import Testing

@testable import EventLoops

extension EventLoopsSuite {
    /// What an HTTP connection machine leans on: pausing reads, closing with writes queued, closing from
    /// inside a callback.
    @Suite struct TCPConnectionStateTests {
        @Test func pausedReadingDeliversNothingUntilResumed() throws {
            let loop = try EventLoop(name: "test-pause")
            defer { loop.stop() }
            let events = Recorder<ConnectionEvent>()
            let connections = Recorder<LoopBound<TCPConnection>>()
            let (_, port) = try startServer(on: loop, events: events, echo: false) { connection in
                connection.stopReading()
                connections.record(LoopBound(connection, on: loop))
            }
            let client = try TestClient(port: port)
            try client.send("early")
            #expect(connections.wait { !$0.isEmpty })
            // A turn of the loop that finds the bytes waiting in the kernel, yet delivers none.
            let timerFired = Recorder<Bool>()
            try loop.performAndWait { LoopTimer(on: loop) { timerFired.record(true) }.schedule(afterMilliseconds: 20) }
            #expect(timerFired.wait { !$0.isEmpty })
            #expect(!events.all.contains { if case .read = $0 { true } else { false } })
            let connection = connections.all[0]
            try loop.performAndWait { connection.value.startReading() }
            #expect(events.wait { $0.contains(.read(Array("early".utf8))) })
        }

        @Test func closingWithWritesQueuedCancelsThemQuietlyAndFreesTheConnection() throws {
            let loop = try EventLoop(name: "test-cancel")
            defer { loop.stop() }
            let events = Recorder<ConnectionEvent>()
            let state = Recorder<String>()
            final class Weak {
                weak var connection: TCPConnection?
            }
            let weak = LoopConfined(Weak())
            let released = Recorder<Bool>()
            let (_, port) = try startServer(on: loop, events: events, echo: false) { connection in
                weak.value.connection = connection
                let queued = !connection.write(pattern(count: 8 * 1024 * 1024))
                state.record("queued \(queued) \(connection.queuedWriteCount)")
                connection.close()
                state.record("write after close \(connection.write(Array("x".utf8)))")
            }
            let client = try TestClient(port: port)
            #expect(events.wait { $0.contains(.closed) })
            #expect(state.all == ["queued true 1", "write after close false"])
            #expect(!events.all.contains(.finishedWriting))
            #expect(!events.all.contains { if case .failed = $0 { true } else { false } })
            _ = client
            try loop.performAndWait {
                // The close callback has run: nothing holds the connection or its delegate any more.
                released.record(loop.openHandles == 1)
                released.record(weak.value.connection == nil)
            }
            #expect(released.all == [true, true])
        }

        @Test func closeAfterWritingDeliversEveryQueuedByteThenTheEnd() throws {
            let loop = try EventLoop(name: "test-close-after")
            defer { loop.stop() }
            let events = Recorder<ConnectionEvent>()
            let size = 8 * 1024 * 1024
            let payload = pattern(count: size)
            let state = Recorder<String>()
            let (_, port) = try startServer(on: loop, events: events, echo: false) { connection in
                state.record("queued \(!connection.write(payload))")
                connection.closeAfterWriting()
                state.record("closing \(connection.isClosing), refused \(!connection.write(Array("x".utf8)))")
            }
            let client = try TestClient(port: port)
            #expect(state.wait { $0.count == 2 })
            #expect(state.all == ["queued true", "closing false, refused true"])
            #expect(try client.receive(count: size, chunk: 16 * 1024) == payload)
            #expect(client.readsEndOfInput())
            #expect(events.wait { $0.contains(.closed) })
            #expect(!events.all.contains(.finishedWriting))
        }

        @Test func closingFromInsideAReadEndsTheCallbacks() throws {
            let loop = try EventLoop(name: "test-inside")
            defer { loop.stop() }
            final class CloseOnRead: TCPConnectionDelegate {
                let events: Recorder<ConnectionEvent>
                init(events: Recorder<ConnectionEvent>) { self.events = events }
                func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
                    events.record(.read(Array(bytes)))
                    connection.write(Array("answer".utf8))
                    connection.close()
                }
                func connectionDidReachEnd(_ connection: TCPConnection) { events.record(.end) }
                func connection(_ connection: TCPConnection, didFail error: LoopError) {
                    events.record(.failed(error.code))
                }
                func connectionDidClose(_ connection: TCPConnection) { events.record(.closed) }
            }
            let events = Recorder<ConnectionEvent>()
            let port = try loop.performAndWait {
                try TCPListener(on: loop, host: "127.0.0.1", port: 0) { connection in
                    connection.delegate = CloseOnRead(events: events)
                    connection.startReading()
                }.port
            }
            let client = try TestClient(port: port)
            try client.send("question")
            #expect(try client.receive(count: 6) == Array("answer".utf8))
            #expect(client.readsEndOfInput())
            #expect(events.wait { $0.contains(.closed) })
            #expect(events.all == [.read(Array("question".utf8)), .closed])
        }
    }
}
