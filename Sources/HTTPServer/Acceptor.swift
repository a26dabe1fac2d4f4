import CMicroHTTPD
import CSystem
import Glibc

/// Accepts the server's connections on a thread of its own and hands each to libmicrohttpd
/// (`MHD_add_connection`, which applies the connection limits and closes a socket it refuses).
///
/// Why not MHD's own accept: to stop accepting while requests are still answered, MHD offers only
/// `MHD_quiesce_daemon`, which in 0.9.75 (and still in 1.0.1) aborts the process when a worker thread
/// that is awake at that moment takes the listening socket out of its epoll set first. Stopping this
/// thread needs nothing from MHD.
///
/// Ownership: the listening socket and the wake-up eventfd are this object's, closed once by ``stop()``;
/// the thread holds the object (retained) until it ends, and `stop()` waits for it to end.
final class Acceptor: @unchecked Sendable {
    // @unchecked: `thread` is written once by `start`, in `HTTPServer.init`, and read by `stop`, which only
    // the server reaches after its init (once: the acceptor is taken out of the lifecycle lock's state first);
    // the descriptors never change; the daemon outlives the thread (`stop` joins it before MHD stops).
    private let listener: Int32
    private let wake: Int32
    private let daemon: OpaquePointer
    private var thread: pthread_t?

    init(listener: Int32, daemon: OpaquePointer) throws(HTTPServerError) {
        self.listener = listener
        self.daemon = daemon
        wake = eventfd(0, Int32(EFD_CLOEXEC))
        guard wake >= 0 else { throw HTTPServerError(.startFailed, "eventfd failed (descriptors)") }
    }

    /// Starts the accepting thread.
    func start() throws(HTTPServerError) {
        var created = pthread_t()
        let retained = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(
            &created, nil,
            { raw in
                let acceptor = Unmanaged<Acceptor>.fromOpaque(raw!).takeRetainedValue()
                acceptor.run()
                return nil
            }, retained)
        guard status == 0 else {
            Unmanaged<Acceptor>.fromOpaque(retained).release()
            throw HTTPServerError(.startFailed, "cannot start the accepting thread")
        }
        thread = created
    }

    /// Stops accepting and waits for the thread to end; then new connection attempts are refused and queued
    /// ones reset (the socket is shut down and closed). Call once.
    func stop() {
        var one: UInt64 = 1
        _ = write(wake, &one, 8)
        if let thread { pthread_join(thread, nil) }
        thread = nil
        _ = shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        close(wake)
    }

    private func run() {
        _ = csystem_set_thread_name("http-accept")
        var fds = [
            pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            if poll(&fds, 2, -1) < 0 {
                // Never stop accepting on a failed poll (ENOMEM): try again shortly.
                if errno != EINTR { usleep(10_000) }
                continue
            }
            if fds[1].revents != 0 { return }
            guard fds[0].revents != 0 else { continue }
            if !acceptAll() {
                // Out of descriptors (or another resource): wait a little instead of spinning on a socket
                // that stays readable; a stop still ends the wait at once.
                var waitForStop = pollfd(fd: wake, events: Int16(POLLIN), revents: 0)
                if poll(&waitForStop, 1, 50) > 0 { return }
            }
        }
    }

    /// Accepts every connection queued now. False when accepting failed for want of a resource.
    private func acceptAll() -> Bool {
        while true {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept(listener, $0, &length)
                }
            }
            guard client >= 0 else {
                switch errno {
                case EAGAIN, EWOULDBLOCK, EINTR, ECONNABORTED, EPROTO: return true
                default: return false
                }
            }
            // Non-blocking, as MHD's epoll loop needs, and not inherited by child processes.
            _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            // MHD owns the socket from here, and closes it itself if it refuses the connection (limits).
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { MHD_add_connection(daemon, client, $0, length) }
            }
        }
    }
}
