import Foundation
import RelayTestSupport
import Synchronization
import TCPForwarder

#if canImport(Glibc)
    import Glibc
#endif

/// A loopback TCP forwarder to a port that counts the connections it accepts: bytes pass through
/// unread, so a test can see whether a client reused its connection.
final class CountingForwarder: Sendable {
    let port: UInt16
    private let listenFD: Int32
    private let shared = Shared()
    private let acceptorDone = DispatchSemaphore(value: 0)

    var connections: Int { shared.accepted.load(ordering: .relaxed) }

    /// Shared with the forwarding threads, which must not keep the forwarder alive.
    private final class Shared: Sendable {
        let accepted = Atomic<Int>(0)
        /// The sockets of connections being forwarded. A pair's last pump closes both under this lock, so
        /// deinit, which shuts the listed ones down, never touches a number that is closed (or reused).
        let open = Mutex<Set<Int32>>([])
    }

    /// One forwarded connection: its two pumps, the second of which to end closes both sockets.
    private final class Pair: Sendable {
        let client: Int32
        let upstream: Int32
        let pumpsRunning = Atomic<Int>(2)

        init(client: Int32, upstream: Int32) {
            self.client = client
            self.upstream = upstream
        }
    }

    init(to target: UInt16) throws {
        let listener = try LoopbackListener()
        listenFD = listener.descriptor
        port = listener.port
        let thread = Thread { [shared, acceptorDone] in
            defer { acceptorDone.signal() }
            while true {
                let client = accept(listener.descriptor, nil, nil)
                guard client >= 0 else { return }
                shared.accepted.add(1, ordering: .relaxed)
                let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var relay = Self.loopback(port: target)
                let connected = withUnsafePointer(to: &relay) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                guard connected == 0 else {
                    close(client)
                    close(upstream)
                    continue
                }
                let pair = Pair(client: client, upstream: upstream)
                shared.open.withLock { $0.formUnion([client, upstream]) }
                Self.pump(from: client, to: upstream, of: pair, shared: shared)
                Self.pump(from: upstream, to: client, of: pair, shared: shared)
            }
        }
        thread.start()
    }

    /// Stops accepting and ends the connections still forwarded (their pumps close them).
    deinit {
        // The shutdown wakes the accept thread; the number is closed only once that thread has ended, so it
        // never calls accept on a number that another file has taken meanwhile.
        shutdown(listenFD, Int32(SHUT_RDWR))
        acceptorDone.wait()
        close(listenFD)
        shared.open.withLock { open in
            for descriptor in open { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// Copies bytes one way until either side closes, then closes both directions; the pair's second pump
    /// to end closes both sockets.
    private static func pump(from source: Int32, to destination: Int32, of pair: Pair, shared: Shared) {
        Thread {
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                let count = read(source, &buffer, buffer.count)
                guard count > 0, write(destination, buffer, count) == count else { break }
            }
            shutdown(destination, Int32(SHUT_WR))
            shutdown(source, Int32(SHUT_RD))
            guard pair.pumpsRunning.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
            shared.open.withLock { open in
                open.subtract([pair.client, pair.upstream])
                close(pair.client)
                close(pair.upstream)
            }
        }.start()
    }
}
