import COpenSSL

/// One TLS connection's OpenSSL `SSL`, client or server side, as the network modules drive it: the handshake
/// step, reads and writes of plaintext, the close_notify, the agreed protocol. A handle, not an owner: it is
/// copied freely, and whoever made it (``TLSClientContext/session(host:hostIsAddress:)``,
/// ``TLSServerContext/session()``) calls ``free()`` exactly once, after its last use. Freeing the `SSL` frees the
/// BIOs it holds with it.
///
/// The reads and writes are inlined into their callers: a push's records pass here, and a call through this
/// type costs what the `SSL_*` call under it costs.
public struct TLSSession {
    /// The `SSL`, valid until ``free()``.
    @usableFromInline let ssl: OpaquePointer

    @usableFromInline init(_ ssl: OpaquePointer) { self.ssl = ssl }

    /// What one ``read(into:)`` did.
    public enum ReadResult: Equatable {
        /// This many bytes of plaintext are in the buffer.
        case read(Int)
        /// Everything received is read: more records must arrive first (or TLS has something to send).
        case wantsMore
        /// The peer sent its close_notify: nothing more will come.
        case closed
        /// TLS failed; OpenSSL's first reason, empty when its error queue was (the peer closed).
        case failed(String)
    }

    /// What one ``write(_:)`` did.
    public enum WriteResult: Equatable {
        /// TLS took this many bytes of plaintext.
        case wrote(Int)
        /// The socket under a socket BIO is full: write again once it is writable.
        case wantsWritable
        /// TLS must read first (a key update): write again after reading.
        case wantsReadable
        /// TLS failed; OpenSSL's first reason, empty when its error queue was.
        case failed(String)
    }

    /// Reads decrypted bytes into `buffer` from the records the BIO holds.
    @inlinable
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        OpenSSLErrorQueue.clear()
        let count = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
        if count > 0 { return .read(Int(count)) }
        switch SSL_get_error(ssl, count) {
        case SSL_ERROR_WANT_READ: return .wantsMore
        case SSL_ERROR_ZERO_RETURN: return .closed
        default: return .failed(OpenSSLErrorQueue.drain(keeping: 1))
        }
    }

    /// Encrypts a prefix of `bytes` into records written to the BIO. With partial writes enabled (both contexts
    /// enable them) OpenSSL takes at most one record's worth (16 KiB) a call: call again with the rest.
    @inlinable
    public func write(_ bytes: UnsafeRawBufferPointer) -> WriteResult {
        OpenSSLErrorQueue.clear()
        let written = SSL_write(ssl, bytes.baseAddress, Int32(clamping: bytes.count))
        if written > 0 { return .wrote(Int(written)) }
        switch SSL_get_error(ssl, written) {
        case SSL_ERROR_WANT_WRITE: return .wantsWritable
        case SSL_ERROR_WANT_READ: return .wantsReadable
        default: return .failed(OpenSSLErrorQueue.drain(keeping: 1))
        }
    }

    /// One step of the handshake (``TLSHandshake/step(_:)``).
    public func handshake() -> TLSHandshake.Step {
        TLSHandshake.step(ssl)
    }

    /// The protocol ALPN agreed on, once the handshake is done; nil when none was.
    public var negotiatedProtocol: String? {
        var selected: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &selected, &length)
        guard let selected, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: selected, count: Int(length)), as: UTF8.self)
    }

    /// One step of a server's handshake (``TLSHandshake/acceptStep(_:)``).
    public func acceptStep() -> TLSHandshake.AcceptStep {
        TLSHandshake.acceptStep(ssl)
    }

    /// Whether the handshake agreed on `name` by ALPN (``ALPN/agreed(on:_:)``).
    public func agreed(on name: String) -> Bool {
        ALPN.agreed(on: name, ssl)
    }

    /// Writes a close_notify into the BIO (the caller flushes it), leaving the thread's error queue empty.
    public func shutdown() {
        OpenSSLErrorQueue.clear()
        _ = SSL_shutdown(ssl)
        OpenSSLErrorQueue.clear()
    }

    /// Reads and writes through `records`, one BIO both ways: the `SSL` holds the BIO's one reference, and
    /// `records` must outlive the TLS session (free the session first). False when OpenSSL cannot allocate the BIO.
    public func attach(_ records: StreamBIO) -> Bool {
        guard let bio = records.makeBIO() else { return false }
        SSL_set_bio(ssl, bio, bio)
        return true
    }

    /// Frees the `SSL` and the BIOs it holds: once, by the session's maker, after the last use.
    public func free() {
        SSL_free(ssl)
    }

    // MARK: Memory BIOs (a server session's)

    /// Hands `bytes` received from the peer to OpenSSL (copied into the session's input memory BIO).
    public func receive(_ bytes: UnsafeRawBufferPointer) {
        guard let input = SSL_get_rbio(ssl) else { return }
        _ = BIO_write(input, bytes.baseAddress, Int32(clamping: bytes.count))
    }

    /// Hands the records OpenSSL wrote into the session's output memory BIO to `send`, through `buffer`, a
    /// buffer's worth at a time, until none is left.
    public func flushOutput(through buffer: UnsafeMutableRawBufferPointer, _ send: (UnsafeRawBufferPointer) -> Void) {
        guard let output = SSL_get_wbio(ssl) else { return }
        while BIO_ctrl_pending(output) > 0 {
            let count = BIO_read(output, buffer.baseAddress, Int32(clamping: buffer.count))
            guard count > 0 else { return }
            send(UnsafeRawBufferPointer(rebasing: buffer[0..<Int(count)]))
        }
    }
}

/// OpenSSL's state for the calling thread.
public enum OpenSSLThread {
    /// Frees the calling thread's OpenSSL state (its error queue, its random generators): what a thread that used
    /// OpenSSL runs as it ends (an event loop's `onThreadExit`).
    public static func stop() {
        OPENSSL_thread_stop()
    }
}
