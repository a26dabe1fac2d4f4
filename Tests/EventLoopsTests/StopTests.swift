import Glibc
import RelayTestSupport
import Testing

@testable import EventLoops

extension EventLoopsSuite {
    @Suite struct StopTests {
        @Test func stopWithOpenConnectionsClosesEveryHandleAndDescriptor() throws {
            let loop = try EventLoop(name: "test-leak")
            let events = Recorder<ConnectionEvent>()
            let serverSockets = Recorder<String>()
            let connections = Recorder<LoopBound<TCPConnection>>()
            let (listener, port) = try startServer(on: loop, events: events) { connection in
                serverSockets.record(socketName(of: connection.descriptor!))
                connections.record(LoopBound(connection, on: loop))
                // A timer per connection, left scheduled far away.
                LoopTimer(on: loop) {}.schedule(afterMilliseconds: 3_600_000)
            }
            let listenerSocket = try loop.performAndWait { socketName(of: listener.value.descriptor!) }
            var clients: [TestClient] = []
            for _ in 0..<20 {
                let client = try TestClient(port: port)
                try client.send("x")
                _ = try client.receive(count: 1)
                clients.append(client)
            }
            let watcher = try loop.performAndWait { () -> LoopBound<SignalWatcher> in
                LoopBound(try SignalWatcher(on: loop, signal: SIGUSR2) { _ in }, on: loop)
            }
            _ = watcher
            #expect(try loop.performAndWait { loop.openHandles } == 1 + 20 * 2 + 1)
            // The loop's own descriptors, known by what cannot be reused while they live: sockets by inode, the
            // epoll set by the descriptors it watches. (Other test targets open and close descriptors meanwhile,
            // so a plain count of /proc/self/fd could not tell.)
            let epoll = try loop.performAndWait { loop.backendDescriptor }
            let epollInfo = descriptorInfo(epoll)
            #expect(epollInfo.contains("tfd:"))

            loop.stop()

            // Every connection heard that it closed, and every client sees its end of input.
            #expect(events.all.filter { $0 == .closed }.count == 20)
            for client in clients { #expect(client.readsEndOfInput()) }
            clients.removeAll()
            // The loop's own sockets are gone (by inode, which no other socket can reuse while they live).
            let after = openDescriptors()
            #expect(!after.contains(listenerSocket))
            #expect(serverSockets.all.count == 20)
            #expect(serverSockets.all.filter { after.contains($0) }.count == 0)
            #expect(loop.openHandles == 0)
            // uv_loop_close succeeded, so libuv closed its epoll set, its wake-up and its signal pipe; the epoll
            // set is checked here too (its number may be reused since, but not with the same watch list).
            let closedCleanly = loop.closedCleanly.load(ordering: .relaxed)
            #expect(closedCleanly)
            #expect(descriptorInfo(epoll) != epollInfo, "the epoll set is still open")
        }
    }

    @Suite struct SignalWatcherTests {
        @Test(arguments: [SIGHUP, SIGTERM, SIGINT])
        func deliversTheSignalOnTheLoop(signal: Int32) throws {
            let loop = try EventLoop(name: "test-signal")
            defer { loop.stop() }
            let received = Recorder<Int32>()
            let watcher = try loop.performAndWait { () -> LoopBound<SignalWatcher> in
                LoopBound(
                    try SignalWatcher(on: loop, signal: signal) { number in
                        received.record(loop.isCurrent ? number : -1)
                    }, on: loop)
            }
            kill(getpid(), signal)
            #expect(received.wait { !$0.isEmpty })
            #expect(received.all == [signal])
            try loop.performAndWait { watcher.value.close() }
        }
    }
}
