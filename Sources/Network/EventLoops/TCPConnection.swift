import CUV
import Glibc

/// What a ``TCPConnection`` tells its owner, always on the connection's loop thread.
public protocol TCPConnectionDelegate: AnyObject {
    /// Bytes arrived. `bytes` is the loop's read buffer, valid only during this call: copy what you keep.
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer)
    /// The peer closed its side (a FIN, read as end of input); reading has stopped, writing still works.
    func connectionDidReachEnd(_ connection: TCPConnection)
    /// Reading, writing or connecting failed (``LoopError/Code/connectionReset`` for a reset peer):
    /// nothing more will be read or written; close the connection.
    func connection(_ connection: TCPConnection, didFail error: LoopError)
    /// Every write that was queued (`write(_:)` returned false) is now in the kernel.
    func connectionDidFinishWriting(_ connection: TCPConnection)
    /// An outgoing connection (``TCPConnection/connect(on:host:port:delegate:)``) is established.
    func connectionDidConnect(_ connection: TCPConnection)
    /// The connection's handle has closed (its descriptor too); the last call. The connection drops its
    /// delegate right after.
    func connectionDidClose(_ connection: TCPConnection)
}

extension TCPConnectionDelegate {
    public func connectionDidFinishWriting(_ connection: TCPConnection) {}
    public func connectionDidConnect(_ connection: TCPConnection) {}
    public func connectionDidClose(_ connection: TCPConnection) {}
}

/// A TCP connection on one loop (`uv_tcp_t`): accepted by a ``TCPListener`` or made by
/// ``connect(on:host:port:delegate:)``. Loop-bound: use only on its loop's thread.
///
/// Reads go into the loop's one read buffer and reach the delegate as an `UnsafeRawBufferPointer` valid
/// during the call. A write is tried at once (`uv_try_write`); only what the socket refuses is copied and
/// queued (`uv_write`), and the delegate hears ``TCPConnectionDelegate/connectionDidFinishWriting(_:)`` when
/// the queue has drained.
///
/// Ownership: the open handle holds the connection (see ``LoopHandle``) and the connection holds its
/// delegate, until ``TCPConnectionDelegate/connectionDidClose(_:)``. A queued write owns its copy of the bytes
/// (freed in its callback, which libuv calls with `UV_ECANCELED` before the close callback when the
/// connection closes first).
public final class TCPConnection: LoopHandle {
    /// Held strongly until the connection has closed.
    public var delegate: (any TCPConnectionDelegate)?
    /// The peer's address, known once accepted or connected.
    public private(set) var peerAddress: IPAddress?
    /// The peer's port, known once accepted or connected.
    public private(set) var peerPort: UInt16 = 0
    /// Writes queued in libuv and not yet completed.
    public private(set) var queuedWriteCount = 0
    /// Bytes of those writes.
    public private(set) var queuedByteCount = 0
    /// Reading is started (and has not met end of input or an error).
    public private(set) var isReading = false
    private var outputShutDown = false
    /// `closeAfterWriting()` was called: the last write's completion closes.
    private var closesWhenWritten = false

    /// A handle ready for `uv_accept`.
    init(acceptingOn loop: EventLoop) {
        super.init(loop: loop, type: UV_TCP)
        uv_tcp_init(loop.raw, tcp)
        didOpen()
    }

    var tcp: UnsafeMutablePointer<uv_tcp_t> {
        handle!.assumingMemoryBound(to: uv_tcp_t.self)
    }

    var stream: UnsafeMutablePointer<uv_stream_t> {
        CUV_stream(tcp)
    }

    /// Called by the listener once `uv_accept` succeeded.
    func accepted() {
        uv_tcp_nodelay(tcp, 1)
        readPeer()
    }

    private func readPeer() {
        var address = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getpeername(tcp, $0, &length) }
        }
        guard status == 0 else { return }
        let peer = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { IPAddress.read($0) }
        }
        peerAddress = peer?.0
        peerPort = peer?.port ?? 0
    }

    /// Takes over a connected socket accepted elsewhere (another thread's accept, another loop's listener
    /// handing connections round-robin): it becomes a connection of `loop`, with `TCP_NODELAY`, not reading
    /// yet. The connection owns the descriptor from here, also when this throws. On `loop`'s thread.
    public static func adopt(_ descriptor: Int32, on loop: EventLoop) throws(LoopError) -> TCPConnection {
        let connection = TCPConnection(acceptingOn: loop)
        let status = uv_tcp_open(connection.tcp, descriptor)
        guard status == 0 else {
            Glibc.close(descriptor)
            connection.close()
            throw LoopError(status: status, "cannot adopt a connection")
        }
        connection.accepted()
        return connection
    }

    // MARK: Connecting

    /// Connects to `host` (an IPv4 or IPv6 literal) and `port`; the delegate hears
    /// ``TCPConnectionDelegate/connectionDidConnect(_:)`` or ``TCPConnectionDelegate/connection(_:didFail:)``
    /// with ``LoopError/Code/connectFailed``. Writes made before the connection is established are queued.
    public static func connect(
        on loop: EventLoop, host: String, port: UInt16, delegate: any TCPConnectionDelegate
    ) throws(LoopError) -> TCPConnection {
        let address = try SocketAddress(host: host, port: port)
        return try connect(on: loop, address: SocketAddressBytes(address), delegate: delegate)
    }

    /// Connects to an address from ``HostResolver`` (or ``ResolvedAddress/literal(_:port:)``), as
    /// ``connect(on:host:port:delegate:)`` does.
    public static func connect(
        on loop: EventLoop, to address: ResolvedAddress, delegate: any TCPConnectionDelegate
    ) throws(LoopError) -> TCPConnection {
        try connect(on: loop, address: address.address, delegate: delegate)
    }

    private static func connect(
        on loop: EventLoop, address: SocketAddressBytes, delegate: any TCPConnectionDelegate
    ) throws(LoopError) -> TCPConnection {
        let connection = TCPConnection(acceptingOn: loop)
        connection.delegate = delegate
        let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)
        let status = address.withSocketAddress { target in
            uv_tcp_connect(
                request, connection.tcp, target,
                { request, status in
                    // The request is freed here whatever happened; its handle's owner is still alive (the
                    // handle holds it until its close callback, which comes after this one).
                    let stream = request!.pointee.handle!
                    request!.deallocate()
                    let connection = unsafeDowncast(LoopHandle.owner(of: stream), to: TCPConnection.self)
                    connection.connected(status: status)
                })
        }
        guard status == 0 else {
            request.deallocate()
            // The caller hears the error from this throw, not from the delegate.
            connection.delegate = nil
            connection.close()
            throw LoopError(status: status, "cannot connect", code: .connectFailed)
        }
        return connection
    }

    private func connected(status: Int32) {
        guard !isClosing, status != UV_ECANCELED.rawValue else { return }
        guard status == 0 else {
            delegate?.connection(self, didFail: LoopError(status: status, "cannot connect", code: .connectFailed))
            return
        }
        uv_tcp_nodelay(tcp, 1)
        readPeer()
        delegate?.connectionDidConnect(self)
    }

    // MARK: Reading

    /// Starts (or resumes) delivering reads to the delegate.
    public func startReading() {
        loop.preconditionCurrent()
        guard !isClosing, !isReading else { return }
        let status = uv_read_start(
            stream,
            { handle, _, buffer in
                // Every connection of the loop reads into the loop's buffer: libuv reads one at a time and
                // hands the bytes to the read callback before it asks for a buffer again.
                let readBuffer = LoopHandle.owner(of: handle!).loop.readBuffer
                let base = readBuffer.baseAddress!.assumingMemoryBound(to: CChar.self)
                buffer!.pointee = uv_buf_t(base: base, len: readBuffer.count)
            },
            { stream, count, buffer in
                let connection = unsafeDowncast(LoopHandle.owner(of: stream!), to: TCPConnection.self)
                connection.read(count: count, from: buffer!.pointee)
            })
        if status == 0 {
            isReading = true
        } else {
            fail(LoopError(status: status, "cannot read"))
        }
    }

    /// Pauses reading (the kernel's buffer then fills and TCP pushes back on the peer); resume with
    /// ``startReading()``.
    public func stopReading() {
        loop.preconditionCurrent()
        guard !isClosing, isReading else { return }
        isReading = false
        uv_read_stop(stream)
    }

    private func read(count: Int, from buffer: uv_buf_t) {
        guard !isClosing else { return }
        if count > 0 {
            delegate?.connection(self, didRead: UnsafeRawBufferPointer(start: buffer.base, count: count))
        } else if count == Int(UV_EOF.rawValue) {
            isReading = false
            delegate?.connectionDidReachEnd(self)
        } else if count < 0 {
            isReading = false
            uv_read_stop(stream)
            delegate?.connection(self, didFail: LoopError(status: Int32(count), "read failed"))
        }
        // 0: nothing was read (EAGAIN); libuv waits for the next readiness.
    }

    // MARK: Writing

    /// Writes `bytes`: as much as the socket takes at once, the rest copied and queued. Returns true when
    /// every byte is in the kernel now; false when some were queued (the delegate then hears
    /// ``TCPConnectionDelegate/connectionDidFinishWriting(_:)`` once all queued writes are done) or when the
    /// connection is closing. Bytes are written in the order of the calls. A failed write reaches the
    /// delegate later, as ``TCPConnectionDelegate/connection(_:didFail:)``, never from inside this call.
    @discardableResult
    public func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        write(bytes, UnsafeRawBufferPointer(start: nil, count: 0))
    }

    /// Writes `first` then `second` in one system call (an answer's head and body, without joining them
    /// first); otherwise as `write(_:)`.
    @discardableResult
    public func write(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer) -> Bool {
        loop.preconditionCurrent()
        guard !isClosing, !closesWhenWritten else { return false }
        let total = first.count + second.count
        guard total > 0 else { return queuedWriteCount == 0 }
        var written = 0
        if queuedWriteCount == 0 {
            var buffers = (Self.buffer(first), Self.buffer(second))
            let count: UInt32 = second.isEmpty ? 1 : 2
            let result = withUnsafeMutableBytes(of: &buffers) { raw in
                uv_try_write(stream, raw.baseAddress!.assumingMemoryBound(to: uv_buf_t.self), count)
            }
            if result == total { return true }
            // EAGAIN or a partial write: queue the rest. Another error (EPIPE, ECONNRESET): queue it anyway;
            // uv_write meets the same error and reports it from its callback, on a later turn.
            written = max(0, Int(result))
        }
        let firstRest = UnsafeRawBufferPointer(rebasing: first[min(written, first.count)...])
        let secondRest = UnsafeRawBufferPointer(rebasing: second[max(0, written - first.count)...])
        queue(firstRest, secondRest)
        return false
    }

    /// Writes `bytes`; see `write(_:)`.
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { write($0) }
    }

    private static func buffer(_ bytes: UnsafeRawBufferPointer) -> uv_buf_t {
        guard let base = bytes.baseAddress else { return uv_buf_t(base: nil, len: 0) }
        return uv_buf_t(
            base: UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: CChar.self)), len: bytes.count)
    }

    /// One allocation per queued write: the request, then the byte count, then the bytes.
    private struct QueuedWrite {
        var request: uv_write_t
        var count: Int
    }

    /// Copies `first` and `second` into one block and queues it.
    private func queue(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer) {
        let count = first.count + second.count
        let headerSize = MemoryLayout<QueuedWrite>.stride
        let block = UnsafeMutableRawPointer.allocate(byteCount: headerSize + count, alignment: 16)
        let header = block.bindMemory(to: QueuedWrite.self, capacity: 1)
        header.pointer(to: \.count)!.initialize(to: count)
        let copy = block + headerSize
        if let base = first.baseAddress { copy.copyMemory(from: base, byteCount: first.count) }
        if let base = second.baseAddress { (copy + first.count).copyMemory(from: base, byteCount: second.count) }
        var buffer = uv_buf_t(base: copy.assumingMemoryBound(to: CChar.self), len: count)
        let request = header.pointer(to: \.request)!
        let status = uv_write(
            request, stream, &buffer, 1,
            { request, status in
                // The block is freed here, whatever the status; its connection is still alive (libuv runs
                // every write callback, with UV_ECANCELED when closing, before the handle's close callback).
                let stream = request!.pointee.handle!
                let block = UnsafeMutableRawPointer(request!)
                let count = block.assumingMemoryBound(to: QueuedWrite.self).pointee.count
                block.deallocate()
                let connection = unsafeDowncast(LoopHandle.owner(of: stream), to: TCPConnection.self)
                connection.wrote(count: count, status: status)
            })
        guard status == 0 else {
            block.deallocate()
            // Never from inside write(): the caller may be in the middle of its own state change.
            loop.enqueue { [self] in fail(LoopError(status: status, "write failed")) }
            return
        }
        queuedWriteCount += 1
        queuedByteCount += count
    }

    private func wrote(count: Int, status: Int32) {
        queuedWriteCount -= 1
        queuedByteCount -= count
        guard !isClosing, status != UV_ECANCELED.rawValue else { return }
        if status < 0 {
            delegate?.connection(self, didFail: LoopError(status: status, "write failed"))
        } else if queuedWriteCount == 0 {
            if closesWhenWritten {
                close()
            } else {
                delegate?.connectionDidFinishWriting(self)
            }
        }
    }

    private func fail(_ error: LoopError) {
        guard !isClosing else { return }
        delegate?.connection(self, didFail: error)
    }

    // MARK: Ending

    /// Half-closes: sends a FIN once every queued write is written; reading goes on. Further calls do nothing.
    public func shutdownOutput() {
        loop.preconditionCurrent()
        guard !isClosing, !outputShutDown else { return }
        outputShutDown = true
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        let status = uv_shutdown(request, stream) { request, _ in
            // Freed whatever the status (UV_ECANCELED when the connection closed first).
            request!.deallocate()
        }
        if status != 0 { request.deallocate() }
    }

    /// Closes once every queued write is in the kernel (at once when none is queued), so that the peer gets
    /// all of it before the FIN; meanwhile reads are still delivered and further writes refused. For an
    /// answer that ends the connection.
    public func closeAfterWriting() {
        loop.preconditionCurrent()
        guard !isClosing else { return }
        if queuedWriteCount == 0 {
            close()
        } else {
            closesWhenWritten = true
        }
    }

    /// Closes at once and sends a reset (RST) instead of a FIN (`SO_LINGER` 0): queued writes are dropped.
    /// For a peer that must not be left waiting in TIME_WAIT or that should see an abort.
    public func reset() {
        loop.preconditionCurrent()
        guard !isClosing else { return }
        var descriptor: uv_os_fd_t = -1
        if uv_fileno(CUV_handle(handle), &descriptor) == 0 {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            _ = setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
        close()
    }

    /// Sets `TCP_NODELAY` (on by default for accepted and connected sockets: answers go out in one write).
    public func setNoDelay(_ enabled: Bool) {
        loop.preconditionCurrent()
        guard !isClosing else { return }
        uv_tcp_nodelay(tcp, enabled ? 1 : 0)
    }

    /// Turns TCP keep-alive on: probes after `idleSeconds` without traffic, then every `intervalSeconds`, so that a
    /// peer that vanished (a dropped NAT entry, a crashed host) is found even on a connection nothing is sent on.
    public func setKeepAlive(idleSeconds: Int32, intervalSeconds: Int32) {
        loop.preconditionCurrent()
        guard !isClosing else { return }
        uv_tcp_keepalive(tcp, 1, UInt32(idleSeconds))
        var descriptor: uv_os_fd_t = -1
        if uv_fileno(CUV_handle(handle), &descriptor) == 0 {
            var interval = intervalSeconds
            _ = setsockopt(
                descriptor, Int32(IPPROTO_TCP), TCP_KEEPINTVL, &interval, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    override func willClose() {
        isReading = false
    }

    override func didClose() {
        let delegate = self.delegate
        self.delegate = nil
        delegate?.connectionDidClose(self)
    }
}
