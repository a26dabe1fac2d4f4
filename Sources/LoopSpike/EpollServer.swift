import CSystem
import Glibc

/// The same server on a plain epoll loop of our own: level-triggered, one read buffer, a write tried at once
/// and the rest kept for EPOLLOUT (never needed at this size, but a real loop must have it).
enum EpollServer {
    final class Connection {
        let descriptor: Int32
        var framer = RequestFramer()
        var unsent: [UInt8] = []
        init(descriptor: Int32) { self.descriptor = descriptor }
    }

    static func run(port: UInt16) throws {
        let listener = try listeningSocket(port: port)
        let poll = epoll_create1(Int32(EPOLL_CLOEXEC))
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = listener
        _ = epoll_ctl(poll, EPOLL_CTL_ADD, listener, &event)
        var connections: [Int32: Connection] = [:]
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while true {
            let count = events.withUnsafeMutableBufferPointer { epoll_wait(poll, $0.baseAddress, 256, -1) }
            guard count > 0 else { continue }
            for index in 0..<Int(count) {
                let descriptor = events[index].data.fd
                if descriptor == listener {
                    while true {
                        // accept4 needs _GNU_SOURCE; accepts happen only at the start of a run.
                        let client = accept(listener, nil, nil)
                        if client < 0 { break }
                        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
                        var one: Int32 = 1
                        _ = setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
                        var added = epoll_event()
                        added.events = EPOLLIN.rawValue
                        added.data.fd = client
                        _ = epoll_ctl(poll, EPOLL_CTL_ADD, client, &added)
                        connections[client] = Connection(descriptor: client)
                    }
                    continue
                }
                guard let connection = connections[descriptor] else { continue }
                var open = true
                if events[index].events & EPOLLOUT.rawValue != 0 && !connection.unsent.isEmpty {
                    open = flush(connection, poll: poll)
                }
                if open && events[index].events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
                    let got = read(descriptor, buffer.baseAddress, buffer.count)
                    if got > 0 {
                        let requests = connection.framer.feed(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
                        for _ in 0..<requests {
                            connection.unsent += answer
                        }
                        if requests > 0 { open = flush(connection, poll: poll) }
                    } else if got == 0 || (errno != EAGAIN && errno != EINTR) {
                        open = false
                    }
                }
                if !open {
                    _ = epoll_ctl(poll, EPOLL_CTL_DEL, descriptor, nil)
                    close(descriptor)
                    connections[descriptor] = nil
                }
            }
        }
    }

    /// Writes what is unsent; asks for EPOLLOUT only when the socket refused some. False when the socket failed.
    private static func flush(_ connection: Connection, poll: Int32) -> Bool {
        let wasBlocked = connection.unsent.count > answer.count
        let written = connection.unsent.withUnsafeBytes { write(connection.descriptor, $0.baseAddress, $0.count) }
        if written < 0 && errno != EAGAIN { return false }
        connection.unsent.removeFirst(max(0, written))
        let blocked = !connection.unsent.isEmpty
        if blocked != wasBlocked {
            var changed = epoll_event()
            changed.events = EPOLLIN.rawValue | (blocked ? EPOLLOUT.rawValue : 0)
            changed.data.fd = connection.descriptor
            _ = epoll_ctl(poll, EPOLL_CTL_MOD, connection.descriptor, &changed)
        }
        return true
    }

    private static func listeningSocket(port: UInt16) throws -> Int32 {
        let descriptor = socket(
            AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        var one: Int32 = 1
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, 4)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 511) == 0 else { throw SpikeError("cannot listen on port \(port)") }
        return descriptor
    }
}

struct SpikeError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
