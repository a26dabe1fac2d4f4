import Foundation
import MonotonicTime
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One forwarded connection of a ``DelayingForwarder``: two sockets and, per direction, a reader
/// that stamps each chunk and a writer that passes it on once its delay is over.
///
/// Sockets are never closed while a thread may still use their numbers: closing one replaces it
/// with /dev/null (`dup2`), which ends the socket (with a reset when `SO_LINGER` 0 is set) and
/// lets the threads see end of file; the numbers are released in `join`.
final class ForwardedLink: Sendable {
    private let client: Int32
    private let server: Int32
    private let delay: Duration
    private let state = Mutex(State())
    private let finished = DispatchSemaphore(value: 0)
    private let chunksReady = [DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)]

    private struct State {
        var closed = false
        var forgotten = false
        var released = false
        /// Chunks waiting, per direction (0: client to server, 1: server to client).
        var queues: [[(due: ContinuousClock.Instant, bytes: [UInt8])]] = [[], []]
        var ended = [false, false]
    }

    init(client: Int32, server: Int32, delay: Duration) {
        self.client = client
        self.server = server
        self.delay = delay
        var one: Int32 = 1
        setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    var isClosed: Bool { state.withLock { $0.closed || $0.forgotten } }

    func start() {
        for direction in 0..<2 {
            let (from, to) = direction == 0 ? (client, server) : (server, client)
            Thread { [self] in read(from: from, direction: direction) }.start()
            Thread { [self] in write(to: to, direction: direction) }.start()
        }
    }

    /// Waits for the four threads, then releases the descriptors.
    func join() {
        for _ in 0..<4 { finished.wait() }
        state.withLock { $0.released = true }
        Glibc.close(client)
        Glibc.close(server)
    }

    private func read(from descriptor: Int32, direction: Int) {
        defer { finished.signal() }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            let reset = count < 0
            let keep = state.withLock { state -> Bool in
                if state.forgotten { return count > 0 }  // read and drop, until the client gives up
                if count > 0 {
                    state.queues[direction].append((.now + delay, Array(buffer[0..<count])))
                } else {
                    state.ended[direction] = true
                }
                return count > 0
            }
            chunksReady[direction].signal()
            if !keep {
                // The peer closed or reset: pass it on once what came before has been delivered.
                if reset { close(reset: true) }
                return
            }
        }
    }

    private func write(to descriptor: Int32, direction: Int) {
        defer { finished.signal() }
        while true {
            let next = state.withLock { state -> (ContinuousClock.Instant, [UInt8])?? in
                if state.closed || state.forgotten { return .some(nil) }
                guard let first = state.queues[direction].first else {
                    return state.ended[direction] ? .some(nil) : nil
                }
                return first
            }
            guard let next else {
                _ = chunksReady[direction].wait(timeout: .now() + 0.05)
                continue
            }
            guard let (due, bytes) = next else {
                let ended = state.withLock { $0.ended[direction] && !$0.closed && !$0.forgotten }
                if ended { shutdown(descriptor, Int32(SHUT_WR)) }
                return
            }
            let now = ContinuousClock.now
            if due > now {
                // The chunk's delay, waited on the direction's wake-up: a close ends the wait at once (and the
                // loop, seeing it, returns); a new chunk behind this one ends it early, and the loop waits again.
                let nanoseconds = Int(clamping: now.duration(to: due).nanoseconds)
                _ = chunksReady[direction].wait(timeout: .now() + .nanoseconds(max(nanoseconds, 1)))
                continue
            }
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes {
                    Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset)
                }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else {
                    close(reset: true)
                    return
                }
                offset += written
            }
            state.withLock { _ = $0.queues[direction].removeFirst() }
        }
    }

    /// Ends both sockets; `reset` sends RST instead of FIN.
    func close(reset: Bool) {
        let first = state.withLock { state -> Bool in
            defer { state.closed = true }
            return !state.closed && !state.released
        }
        guard first else { return }
        for descriptor in [client, server] {
            if reset { Self.abort(descriptor) }
            Self.replaceWithNull(descriptor)
        }
        for semaphore in chunksReady { semaphore.signal() }
    }

    /// The server's side is reset; the client's stays open and is ignored.
    func forget() {
        let first = state.withLock { state -> Bool in
            defer { state.forgotten = true }
            return !state.forgotten && !state.closed
        }
        guard first else { return }
        Self.abort(server)
        Self.replaceWithNull(server)
        for semaphore in chunksReady { semaphore.signal() }
    }

    /// `SO_LINGER` 0: the socket's close sends RST.
    static func abort(_ descriptor: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    private static func replaceWithNull(_ descriptor: Int32) {
        // Wakes a thread blocked reading it (end of file) without sending anything to the peer;
        // the socket itself ends when the last such call has returned.
        shutdown(descriptor, Int32(SHUT_RD))
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        dup2(null, descriptor)
        Glibc.close(null)
    }
}
