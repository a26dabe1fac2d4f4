import CUV

/// Delivers a signal (SIGTERM, SIGINT, SIGHUP, …) to a handler on one loop's thread (`uv_signal_t`):
/// libuv's signal handler only writes to a pipe, so the handler may do anything.
///
/// While a watcher is open, the signal's default action (ending the process for SIGTERM) no longer
/// happens. Loop-bound: use only on its loop's thread.
public final class SignalWatcher: LoopHandle {
    /// The signal watched.
    public let signal: Int32
    private var handler: ((Int32) -> Void)?

    /// Starts watching `signal`; `handler` runs on the loop's thread each time it arrives (signals that
    /// arrive together may be delivered once).
    public init(on loop: EventLoop, signal: Int32, handler: @escaping (Int32) -> Void) throws(LoopError) {
        self.signal = signal
        self.handler = handler
        super.init(loop: loop, type: UV_SIGNAL)
        uv_signal_init(loop.raw, watcher)
        didOpen()
        let status = uv_signal_start(
            watcher,
            { watcher, number in
                let owner = unsafeDowncast(LoopHandle.owner(of: watcher!), to: SignalWatcher.self)
                owner.handler?(number)
            }, signal)
        if status != 0 {
            close()
            throw LoopError(status: status, "cannot watch signal \(signal)", code: .system)
        }
    }

    private var watcher: UnsafeMutablePointer<uv_signal_t> {
        handle!.assumingMemoryBound(to: uv_signal_t.self)
    }

    override func didClose() {
        handler = nil
    }
}
