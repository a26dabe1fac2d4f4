import CSystem
import Glibc

/// A thin epoll(7) set: descriptors registered with a 64-bit token, waited on level-triggered.
final class EventPoll {
    let descriptor: Int32
    private var buffer = [epoll_event](repeating: epoll_event(), count: 1024)

    init() {
        descriptor = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(descriptor >= 0, "epoll_create1 failed")
    }

    deinit { close(descriptor) }

    /// Readable (and, with `writable`, writable) events for `fd`, reported with `token`.
    func add(_ fd: Int32, token: UInt64, writable: Bool = false) {
        control(EPOLL_CTL_ADD, fd, token: token, writable: writable)
    }

    func modify(_ fd: Int32, token: UInt64, writable: Bool) {
        control(EPOLL_CTL_MOD, fd, token: token, writable: writable)
    }

    func remove(_ fd: Int32) {
        var event = epoll_event()
        _ = epoll_ctl(descriptor, EPOLL_CTL_DEL, fd, &event)
    }

    private func control(_ operation: Int32, _ fd: Int32, token: UInt64, writable: Bool) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (writable ? EPOLLOUT.rawValue : 0)
        event.data.u64 = token
        let result = epoll_ctl(descriptor, operation, fd, &event)
        precondition(result == 0, "epoll_ctl failed: errno \(errno)")
    }

    /// Waits up to `timeoutMilliseconds` (-1: forever) and calls `body` for each ready descriptor.
    func wait(timeoutMilliseconds: Int32, _ body: (_ token: UInt64, _ events: UInt32) -> Void) {
        let count = buffer.withUnsafeMutableBufferPointer { events in
            epoll_wait(descriptor, events.baseAddress, Int32(events.count), timeoutMilliseconds)
        }
        guard count > 0 else { return }
        for index in 0..<Int(count) {
            body(buffer[index].data.u64, buffer[index].events)
        }
    }
}
