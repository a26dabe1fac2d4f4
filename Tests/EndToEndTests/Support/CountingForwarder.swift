import Foundation
import RelayTestSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A loopback TCP forwarder to a port that counts the connections it accepts: bytes pass through
/// unread, so a test can see whether a client reused its connection.
final class CountingForwarder: Sendable {
    let port: UInt16
    private let listenFD: Int32
    private let accepted = Counter()

    var connections: Int { accepted.value.load(ordering: .relaxed) }

    /// Shared with the accepting thread, which must not keep the forwarder alive.
    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    init(to target: UInt16) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard fd >= 0, bound == 0, listen(fd, 16) == 0 else { throw TestFailure("forwarder: bind failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listenFD = fd
        port = UInt16(bigEndian: address.sin_port)
        let thread = Thread { [accepted] in
            while true {
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                accepted.value.add(1, ordering: .relaxed)
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
                Self.pump(from: client, to: upstream)
                Self.pump(from: upstream, to: client)
            }
        }
        thread.start()
    }

    deinit {
        shutdown(listenFD, Int32(SHUT_RDWR))
        close(listenFD)
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// Copies bytes one way until either side closes, then closes both directions.
    private static func pump(from source: Int32, to destination: Int32) {
        Thread {
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                let count = read(source, &buffer, buffer.count)
                guard count > 0, write(destination, buffer, count) == count else { break }
            }
            shutdown(destination, Int32(SHUT_WR))
            shutdown(source, Int32(SHUT_RD))
        }.start()
    }
}
