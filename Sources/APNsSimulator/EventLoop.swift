import CNGHTTP2
import COpenSSL
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One poll(2) thread serving TLS + HTTP/2 connections. The accepting loop also owns the listening
/// socket and hands new connections round-robin to its siblings.
///
/// Everything but `inbox` is touched only by the loop's own thread (after `start`).
// @unchecked Sendable: mutable state is confined to the loop thread; other threads only use the
// Mutex-protected inbox and the wake pipe to talk to it.
final class EventLoop: @unchecked Sendable {
    let core: SimulatorCore
    /// The wake pipe: other threads write a byte to `wakeWriteFD`; the loop polls `wakeFD`.
    private let wakeFD: Int32
    private let wakeWriteFD: Int32
    private let listenFD: Int32
    /// Shared nghttp2 callback table (sessions copy it); freed in deinit.
    let callbacks: OpaquePointer
    /// One read buffer for all connections of this loop (they are served one at a time).
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 16)

    private struct Inbox {
        var adopted: [(fd: Int32, id: Int)] = []
        var stopping = false
        /// The loop thread has ended: hand-overs are refused.
        var exited = false
    }
    private let inbox = Mutex(Inbox())
    private let loopThread = Mutex<pthread_t?>(nil)
    private let finished = DispatchSemaphore(value: 0)

    // Loop-thread state.
    var siblings: [EventLoop] = []
    private var nextSibling = 0
    private var connections: [Int32: SimulatorConnection] = [:]
    /// The poll set, rebuilt when connections or their interest change.
    private var pollSet: [pollfd] = []
    private var interests: [Int32: Int16] = [:]
    private var pollSetIsStale = true
    private var timers: [DelayedAnswer] = []

    private struct DelayedAnswer {
        let deadline: UInt64
        let connection: SimulatorConnection
        let notification: DeliveredNotification
    }

    init(core: SimulatorCore, listenFD: Int32) throws {
        self.core = core
        self.listenFD = listenFD
        var table: OpaquePointer?
        guard nghttp2_session_callbacks_new(&table) == 0, let table else {
            throw SimulatorError(.system, "nghttp2_session_callbacks_new failed")
        }
        SimulatorCallbacks.install(in: table)
        callbacks = table
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else {
            nghttp2_session_callbacks_del(table)
            throw SimulatorError(.system, "cannot create the wake pipe: \(String(cString: strerror(errno)))")
        }
        for fd in pipeFDs {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeFD = pipeFDs[0]
        wakeWriteFD = pipeFDs[1]
    }

    deinit {
        close(wakeFD)
        close(wakeWriteFD)
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
        var byte: UInt8 = 1
        _ = write(wakeWriteFD, &byte, 1)
    }

    // MARK: loop thread

    private func run() {
        loopThread.withLock { $0 = pthread_self() }
        running: while true {
            if pollSetIsStale { rebuildPollSet() }
            let count = poll(&pollSet, nfds_t(pollSet.count), timeoutMilliseconds())
            if count < 0 {
                if errno == EINTR { continue }
                break
            }
            if count > 0 {
                // Connections may close while others are served; look each one up again.
                let ready = pollSet.filter { $0.revents != 0 }
                for entry in ready {
                    if entry.fd == wakeFD {
                        if drainInbox() { break running }
                    } else if entry.fd == listenFD {
                        acceptConnections()
                    } else if let connection = connections[entry.fd] {
                        connection.handle()
                    }
                }
            }
            fireTimers()
        }
        for connection in Array(connections.values) { connection.close(graceful: false) }
        timers.removeAll()
        siblings.removeAll()  // the accepting loop lists itself: break that cycle
        if listenFD >= 0 { close(listenFD) }
        inbox.withLock { inbox in
            for item in inbox.adopted { close(item.fd) }
            inbox.adopted.removeAll()
            inbox.exited = true
        }
        // Frees this thread's OpenSSL state now rather than in a thread-exit destructor that runs after
        // `waitUntilFinished()` has returned (a process exiting right after `stop()` would catch it half-freed).
        OPENSSL_thread_stop()
        finished.signal()
    }

    /// Adopts handed-over connections; true when the loop must stop.
    private func drainInbox() -> Bool {
        var bytes = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        while read(wakeFD, &bytes, MemoryLayout.size(ofValue: bytes)) > 0 {}
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
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return  // EAGAIN, or a transient error such as EMFILE: try again on the next event
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var on: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
            let id = core.connectionAccepted()
            let target = siblings.isEmpty ? self : siblings[nextSibling % siblings.count]
            nextSibling &+= 1
            if target === self {
                adopt(fd: fd, id: id)
            } else {
                let handedOver = target.inbox.withLock { inbox in
                    if inbox.exited { return false }
                    inbox.adopted.append((fd, id))
                    return true
                }
                if handedOver { target.wake() } else { close(fd) }
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
        connections[fd] = SimulatorConnection(id: id, fd: fd, ssl: ssl, loop: self)
        watch(fd, writable: false)
    }

    /// Sets the poll interest of a connection: always readable, writable when asked.
    func watch(_ fd: Int32, writable: Bool) {
        interests[fd] = Int16(POLLIN) | (writable ? Int16(POLLOUT) : 0)
        pollSetIsStale = true
    }

    /// Called by a connection as it closes, before its descriptor is closed.
    func forget(_ connection: SimulatorConnection) {
        guard connections[connection.fd] === connection else { return }
        connections[connection.fd] = nil
        interests[connection.fd] = nil
        pollSetIsStale = true
    }

    private func rebuildPollSet() {
        pollSet.removeAll(keepingCapacity: true)
        pollSet.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0))
        if listenFD >= 0 { pollSet.append(pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)) }
        for (fd, events) in interests { pollSet.append(pollfd(fd: fd, events: events, revents: 0)) }
        pollSetIsStale = false
    }

    // MARK: delayed answers

    func schedule(after delay: Duration, connection: SimulatorConnection, notification: DeliveredNotification) {
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
