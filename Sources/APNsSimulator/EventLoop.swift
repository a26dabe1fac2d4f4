import CNGHTTP2
import COpenSSL
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One epoll thread serving TLS + HTTP/2 connections. The accepting loop also owns the listening
/// socket and hands new connections round-robin to its siblings.
///
/// Everything but `inbox` is touched only by the loop's own thread (after `start`).
// @unchecked Sendable: mutable state is confined to the loop thread; other threads only use the
// Mutex-protected inbox and the eventfd to talk to it.
final class EventLoop: @unchecked Sendable {
    let core: SimulatorCore
    private let epollFD: Int32
    private let wakeFD: Int32
    private let listenFD: Int32
    /// Shared nghttp2 callback table (sessions copy it); freed in deinit.
    let callbacks: OpaquePointer
    /// One read buffer for all connections of this loop (they are served one at a time).
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 16)

    private struct Inbox {
        var adopted: [(fd: Int32, id: Int)] = []
        var stopping = false
    }
    private let inbox = Mutex(Inbox())
    private let loopThread = Mutex<pthread_t?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    // Loop-thread state.
    var siblings: [EventLoop] = []
    private var nextSibling = 0
    private var connections: [Int32: Connection] = [:]
    private var timers: [DelayedAnswer] = []

    private struct DelayedAnswer {
        let deadline: UInt64
        let connection: Connection
        let notification: DeliveredNotification
    }

    init(core: SimulatorCore, listenFD: Int32) throws {
        self.core = core
        self.listenFD = listenFD
        var table: OpaquePointer?
        guard nghttp2_session_callbacks_new(&table) == 0, let table else {
            throw SimulatorError(.system, "nghttp2_session_callbacks_new failed")
        }
        HTTP2Callbacks.install(in: table)
        callbacks = table
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard epollFD >= 0, wakeFD >= 0 else {
            if epollFD >= 0 { close(epollFD) }
            if wakeFD >= 0 { close(wakeFD) }
            nghttp2_session_callbacks_del(table)
            throw SimulatorError(.system, "cannot create epoll or eventfd: \(String(cString: strerror(errno)))")
        }
        watch(wakeFD, writable: false, add: true)
        if listenFD >= 0 { watch(listenFD, writable: false, add: true) }
    }

    deinit {
        close(epollFD)
        close(wakeFD)
        nghttp2_session_callbacks_del(callbacks)
        readBuffer.deallocate()
    }

    func start(name: String) {
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    /// Asks the loop to close everything and exit; waits unless called on a loop thread.
    func requestStop() {
        inbox.withLock { $0.stopping = true }
        wake()
    }

    func waitUntilFinished() {
        finished.wait()
        finished.signal()  // let later waiters pass too
    }

    var isCurrentThread: Bool {
        loopThread.withLock { thread in thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    // MARK: loop thread

    private func run() {
        loopThread.withLock { $0 = pthread_self() }
        var events = [epoll_event](repeating: epoll_event(), count: 128)
        running: while true {
            let count = epoll_wait(epollFD, &events, Int32(events.count), timeoutMilliseconds())
            if count < 0 {
                if errno == EINTR { continue }
                break
            }
            for index in 0..<Int(count) {
                let fd = events[index].data.fd
                let mask = events[index].events
                if fd == wakeFD {
                    if drainInbox() { break running }
                } else if fd == listenFD {
                    acceptConnections()
                } else if let connection = connections[fd] {
                    connection.handle(events: mask)
                }
            }
            fireTimers()
        }
        for connection in Array(connections.values) { connection.close(graceful: false) }
        timers.removeAll()
        if listenFD >= 0 { close(listenFD) }
        finished.signal()
    }

    /// Adopts handed-over connections; true when the loop must stop.
    private func drainInbox() -> Bool {
        var counter: UInt64 = 0
        _ = read(wakeFD, &counter, 8)
        let (adopted, stopping) = inbox.withLock { inbox in
            defer { inbox.adopted.removeAll() }
            return (inbox.adopted, inbox.stopping)
        }
        for item in adopted {
            if stopping { close(item.fd) } else { adopt(fd: item.fd, id: item.id) }
        }
        return stopping
    }

    private func acceptConnections() {
        while true {
            let fd = accept4(listenFD, nil, nil, Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue))
            if fd < 0 {
                if errno == EINTR { continue }
                return  // EAGAIN, or a transient error such as EMFILE: try again on the next event
            }
            var on: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
            let id = core.connectionAccepted()
            let target = siblings.isEmpty ? self : siblings[nextSibling % siblings.count]
            nextSibling &+= 1
            if target === self {
                adopt(fd: fd, id: id)
            } else {
                target.inbox.withLock { $0.adopted.append((fd, id)) }
                target.wake()
            }
        }
    }

    private func adopt(fd: Int32, id: Int) {
        guard let ssl = SSL_new(core.tls.context) else {
            ERR_clear_error()
            close(fd)
            return
        }
        SSL_set_fd(ssl, fd)
        SSL_set_accept_state(ssl)
        connections[fd] = Connection(id: id, fd: fd, ssl: ssl, loop: self)
        watch(fd, writable: false, add: true)
    }

    /// Sets the epoll interest of `fd`: always readable, writable when asked.
    func watch(_ fd: Int32, writable: Bool, add: Bool = false) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (writable ? EPOLLOUT.rawValue : 0)
        event.data.fd = fd
        _ = epoll_ctl(epollFD, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event)
    }

    /// Called by a connection as it closes, before its descriptor is closed.
    func forget(_ connection: Connection) {
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, connection.fd, nil)
        if connections[connection.fd] === connection { connections[connection.fd] = nil }
    }

    // MARK: delayed answers

    func schedule(after delay: Duration, connection: Connection, notification: DeliveredNotification) {
        let (seconds, attoseconds) = delay.components
        let nanoseconds = max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(nanoseconds)
        let timer = DelayedAnswer(deadline: deadline, connection: connection, notification: notification)
        let index = timers.firstIndex { $0.deadline > deadline } ?? timers.endIndex
        timers.insert(timer, at: index)
    }

    private func timeoutMilliseconds() -> Int32 {
        guard let first = timers.first else { return -1 }
        let now = DispatchTime.now().uptimeNanoseconds
        if first.deadline <= now { return 0 }
        return Int32(min(60_000, (first.deadline - now + 999_999) / 1_000_000))
    }

    private func fireTimers() {
        guard !timers.isEmpty else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        let due = timers.prefix { $0.deadline <= now }
        guard !due.isEmpty else { return }
        timers.removeFirst(due.count)
        for timer in due { timer.connection.answerDelayed(timer.notification) }
    }
}
