import CNGHTTP2
import EventLoops
import MonotonicTime
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// What one of the simulator's event loops (``EventLoops/EventLoop``) keeps: the nghttp2 callback table, the
/// buffer TLS records are decrypted into, and the listener that accepts onto this loop. Both loops listen on
/// the one listening socket (each on its own descriptor of it): whichever wakes first accepts.
///
/// Loop-bound: made and used on its loop's thread. Connections are owned by their `TCPConnection` (the
/// open handle holds it, and it holds its delegate, the ``SimulatorConnection``).
final class SimulatorLoop {
    let core: SimulatorCore
    let loop: EventLoop
    /// Shared nghttp2 callback table (sessions copy it); freed in deinit.
    let callbacks: OpaquePointer
    /// One buffer for the decrypted bytes of every connection of this loop (they are served one at a time).
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 16)
    /// One buffer for the TLS records a connection of this loop has to send, on their way to its socket.
    let writeBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 16)
    private var listener: TCPListener?

    init(core: SimulatorCore, loop: EventLoop, listening descriptor: Int32) throws {
        self.core = core
        self.loop = loop
        var table: OpaquePointer?
        guard nghttp2_session_callbacks_new(&table) == 0, let table else {
            close(descriptor)
            throw SimulatorError(.system, "nghttp2_session_callbacks_new failed")
        }
        SimulatorCallbacks.install(in: table)
        callbacks = table
        do {
            listener = try TCPListener(on: loop, adopting: descriptor, backlog: 1024) { [unowned self] connection in
                adopt(connection)
            }
        } catch {
            throw SimulatorError(.bindFailed, "cannot listen: \(error.reason)")
        }
    }

    deinit {
        nghttp2_session_callbacks_del(callbacks)
        readBuffer.deallocate()
        writeBuffer.deallocate()
    }

    private func adopt(_ connection: TCPConnection) {
        let id = core.connectionAccepted()
        guard let ssl = core.tls.session() else {
            connection.close()
            return
        }
        connection.delegate = SimulatorConnection(id: id, connection: connection, ssl: ssl, loop: self)
        connection.startReading()
    }

    /// Runs `action` on this loop after `delay` (a delayed answer).
    func schedule(after delay: Duration, _ action: @escaping () -> Void) {
        let holder = TimerHolder()
        let timer = LoopTimer(on: loop) {
            holder.timer?.close()
            holder.timer = nil
            action()
        }
        holder.timer = timer
        timer.schedule(afterMilliseconds: delay.nanoseconds / 1_000_000)
    }

    /// Lets a one-shot timer's handler close the timer (the handler is released when the timer closes).
    private final class TimerHolder {
        var timer: LoopTimer?
    }
}
