import CUV

/// What every libuv handle of this module shares: its memory, its owner, and how it closes.
///
/// Ownership at the C boundary: the handle's `data` holds its Swift owner retained from the moment the
/// handle is initialized until its close callback, which releases it exactly once and only then frees the
/// handle's memory. So an open handle keeps its owner alive even when no Swift code refers to it: a handle
/// ends only by ``close()`` (or by ``EventLoop/stop()``, which closes every handle still open).
public class LoopHandle {
    /// The loop this handle belongs to; it is used only on that loop's thread.
    public let loop: EventLoop
    /// The uv handle (a `uv_tcp_t`, `uv_timer_t`, …); nil once its close callback has run.
    private(set) var handle: UnsafeMutableRawPointer?
    /// `close()` was called: the close callback is pending or has run.
    public private(set) var isClosing = false

    /// Allocates the handle's memory; the subclass initializes the handle and then calls `didOpen()`.
    init(loop: EventLoop, type: uv_handle_type) {
        loop.preconditionCurrent()
        self.loop = loop
        handle = .allocate(byteCount: uv_handle_size(type), alignment: 16)
    }

    /// The handle is initialized: from here it must be closed, and it holds its owner until then.
    func didOpen() {
        CUV_handle(handle).pointee.data = Unmanaged.passRetained(self).toOpaque()
        loop.openHandles += 1
    }

    /// The handle could not be initialized: free its memory (no close callback will come).
    func failedToOpen() {
        handle?.deallocate()
        handle = nil
        isClosing = true
    }

    /// Closes the handle; its close callback runs on a later turn of the loop, then `didClose()`. Further
    /// calls do nothing.
    public func close() {
        loop.preconditionCurrent()
        guard let handle, !isClosing else { return }
        isClosing = true
        willClose()
        uv_close(CUV_handle(handle), loopHandleDidClose)
    }

    /// Called as `close()` begins (before libuv cancels pending requests); subclasses stop their work here.
    func willClose() {}

    /// Called once from the close callback, after the handle's memory is freed.
    func didClose() {}

    /// For the close callback only.
    fileprivate func handleClosed() {
        handle?.deallocate()
        handle = nil
        isClosing = true
        loop.openHandles -= 1
        didClose()
    }

    /// The owner of a handle of this module, from its `data` (unretained: the handle holds it).
    static func owner(of handle: UnsafeMutableRawPointer) -> LoopHandle {
        Unmanaged<LoopHandle>.fromOpaque(CUV_handle(handle).pointee.data).takeUnretainedValue()
    }
}

/// The one close callback of every handle of this module: takes back the retain made in `didOpen()`.
private func loopHandleDidClose(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
    guard let handle, let data = handle.pointee.data else { return }
    handle.pointee.data = nil
    let owner = Unmanaged<LoopHandle>.fromOpaque(data).takeRetainedValue()
    owner.handleClosed()
}

extension LoopHandle {
    /// The handle's descriptor, for tests that check it is closed; nil for handles without one.
    var descriptor: Int32? {
        guard let handle, !isClosing else { return nil }
        var descriptor: uv_os_fd_t = -1
        return uv_fileno(CUV_handle(handle), &descriptor) == 0 ? descriptor : nil
    }
}
