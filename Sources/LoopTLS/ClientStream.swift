import COpenSSL
import ClientTLS
import Glibc
import Loop
import OpenSSLSupport

/// What a ``ClientStream`` tells its owner, always on the stream's loop thread.
public protocol ClientStreamDelegate: AnyObject {
    /// The stream is connected (and, with TLS, handshaken): data may flow.
    func streamDidConnect(_ stream: ClientStream)
    /// Plaintext arrived. `bytes` is valid only during this call: copy what you keep.
    func stream(_ stream: ClientStream, didRead bytes: UnsafeRawBufferPointer)
    /// The stream failed, or the peer closed it: nothing more is read or written, and it closes by itself
    /// (``streamDidClose(_:)`` follows). Said at most once.
    func stream(_ stream: ClientStream, didFail failure: ClientStreamFailure)
    /// Every byte that had to be queued is now in the kernel.
    func streamDidFinishWriting(_ stream: ClientStream)
    /// The stream has closed; the last call. The stream drops its delegate right after.
    func streamDidClose(_ stream: ClientStream)
}

extension ClientStreamDelegate {
    public func streamDidFinishWriting(_ stream: ClientStream) {}
    public func streamDidClose(_ stream: ClientStream) {}
}

/// Why a ``ClientStream`` ended. Equal when their kinds are.
public struct ClientStreamFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        /// The host name has no address (the resolver's words in `reason`).
        case resolve
        /// No address of the host took the TCP connection.
        case connect
        /// The server's certificate did not verify (OpenSSL's words for why).
        case certificate
        /// The TLS handshake failed otherwise (no common protocol, the peer closed during it).
        case handshake
        /// The peer closed the connection (a FIN, or TLS close_notify).
        case closedByPeer
        /// The connection was reset or a read or write failed.
        case reset
        /// TLS failed after the handshake (a bad record).
        case tls
    }

    public let kind: Kind
    /// Human words for a log (the resolver's, the system's, OpenSSL's); never data read from the peer or a secret.
    public let reason: String

    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    public var description: String { reason }
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.kind == rhs.kind }
    public func hash(into hasher: inout Hasher) { hasher.combine(kind) }
}

/// A client connection on one loop: plain TCP, or TLS through OpenSSL on a BIO of its own (``StreamBIO``) over a
/// ``Loop/TCPConnection`` (the spike in docs/LOOP.md measured OpenSSL on memory BIOs cheaper than on the socket).
/// libuv does every read and write; OpenSSL only turns records into plaintext and back.
///
/// Loop-bound: create it, call it and hear from it on its loop's thread only.
///
/// Ownership: while connecting, the pending resolution or TCP connection holds the stream; once connected, the
/// TCP connection holds it (as its delegate) until it has closed. The stream holds its delegate strongly until
/// ``ClientStreamDelegate/streamDidClose(_:)``, so an owner that keeps the stream must not be kept by it beyond
/// that (the usual shape: the owner holds the stream, the stream holds the owner until it closes).
/// The `SSL` and its BIO are freed in `deinit`.
public final class ClientStream: TCPConnectionDelegate {
    /// TLS for a stream: the client context (roots, ALPN) and the name the server's certificate must carry.
    public struct TLS: Sendable {
        public let context: TLSClientContext
        /// A DNS name (also sent as server name indication) or an IP literal (checked against the certificate's
        /// IP addresses).
        public let serverName: String

        public init(context: TLSClientContext, serverName: String) {
            self.context = context
            self.serverName = serverName
        }
    }

    private enum State {
        case resolving
        case connecting(addresses: [ResolvedAddress], next: Int, lastReason: String)
        case handshaking
        case open
        /// Failed, reset or closed by the owner: waiting for the TCP connection's close.
        case ending
        case closed
    }

    public let loop: EventLoop
    private let port: UInt16
    private let tlsSettings: TLS?
    private var delegate: (any ClientStreamDelegate)?
    private var state = State.resolving
    private var connection: TCPConnection?
    private var ssl: OpaquePointer?
    /// The records between OpenSSL and the connection (with TLS).
    private let records = StreamBIO()
    /// Plaintext written before the stream was open, sent once it is.
    private var early: [UInt8] = []
    private var buffer: UnsafeMutableRawBufferPointer?
    private var failed = false
    /// A write failed because the peer closed: nothing more is written, and what the peer sent is still read.
    private var writeFailure: LoopError?

    /// Bytes handed to ``write(_:)`` that are not in the kernel yet.
    public var queuedByteCount: Int { (connection?.queuedByteCount ?? 0) + early.count }

    /// The protocol agreed by ALPN, once connected with TLS.
    public private(set) var negotiatedProtocol: String?

    /// Connected and not ending.
    public var isOpen: Bool {
        if case .open = state { true } else { false }
    }

    private init(loop: EventLoop, port: UInt16, tls: TLS?, delegate: any ClientStreamDelegate) {
        self.loop = loop
        self.port = port
        tlsSettings = tls
        self.delegate = delegate
    }

    deinit {
        if let ssl { SSL_free(ssl) }  // frees its BIO with it, before `records` goes
        buffer?.deallocate()
    }

    /// Resolves `host` (on libuv's pool; an IP literal directly), connects to its addresses in order, then, with
    /// `tls`, handshakes. The delegate hears ``ClientStreamDelegate/streamDidConnect(_:)`` or
    /// ``ClientStreamDelegate/stream(_:didFail:)``, never before this returns. There is no timeout here: the
    /// caller keeps its own deadline and calls ``reset()``.
    public static func connect(
        on loop: EventLoop, host: String, port: UInt16, tls: TLS?, delegate: any ClientStreamDelegate
    ) -> ClientStream {
        loop.preconditionCurrent()
        _ = brokenPipesIgnored
        let stream = ClientStream(loop: loop, port: port, tls: tls, delegate: delegate)
        HostResolver.resolve(host: host, port: port, on: loop) { result in
            guard case .resolving = stream.state else { return }
            switch result {
            case .success(let addresses):
                stream.state = .connecting(addresses: addresses, next: 0, lastReason: "")
                stream.connectNext()
            case .failure(let error):
                stream.fail(.resolve, error.reason)
            }
        }
        return stream
    }

    /// Once per process: libuv writes with `write(2)`, and a write to a connection the server has closed must fail
    /// with EPIPE, not kill the process with SIGPIPE (the HTTP server and the simulator set the same).
    private static let brokenPipesIgnored: Bool = {
        signal(SIGPIPE, SIG_IGN)
        return true
    }()

    // MARK: Writing

    /// Sends `bytes` (plaintext): encrypted with TLS, written at once as far as the socket takes it, the rest
    /// queued. Before the stream is open, kept and sent once it is; after it has ended, dropped.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        loop.preconditionCurrent()
        guard !bytes.isEmpty else { return }
        switch state {
        case .resolving, .connecting, .handshaking:
            early.append(contentsOf: bytes)
        case .open:
            send(bytes)
        case .ending, .closed:
            break
        }
    }

    /// Sends `bytes`, as ``write(_:)``.
    public func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { write($0) }
    }

    private func send(_ bytes: UnsafeRawBufferPointer) {
        guard let connection, writeFailure == nil else { return }
        guard let ssl else {
            _ = connection.write(bytes)
            return
        }
        // A memory BIO takes everything, but with partial writes enabled (the client context enables them)
        // SSL_write returns after each record (16 KiB of plaintext): write until all of it is taken.
        var offset = 0
        while offset < bytes.count {
            OpenSSLErrorQueue.clear()
            let written = SSL_write(ssl, bytes.baseAddress! + offset, Int32(clamping: bytes.count - offset))
            if written <= 0 {
                fail(.tls, OpenSSLErrorQueue.drain(keeping: 1).nonEmpty ?? "a TLS record could not be written")
                return
            }
            offset += Int(written)
        }
        flushRecords()
    }

    /// Moves the records OpenSSL wrote onto the connection, which writes them from where they are and copies
    /// only what the socket refuses.
    private func flushRecords() {
        guard let connection else { return }
        records.flush { _ = connection.write($0) }
    }

    // MARK: Ending

    /// Ends the stream gracefully: with TLS, a close_notify; then the connection closes once everything is
    /// written. The delegate hears ``ClientStreamDelegate/streamDidClose(_:)`` and no failure.
    public func close() {
        loop.preconditionCurrent()
        switch state {
        case .ending, .closed: return
        case .open:
            state = .ending
            if let ssl {
                OpenSSLErrorQueue.clear()
                _ = SSL_shutdown(ssl)
                OpenSSLErrorQueue.clear()
                flushRecords()
            }
            connection?.closeAfterWriting()
        default:
            state = .ending
            endWithoutConnection()
        }
    }

    /// Ends the stream at once (a TCP reset once connected). The delegate hears only
    /// ``ClientStreamDelegate/streamDidClose(_:)``.
    public func reset() {
        loop.preconditionCurrent()
        switch state {
        case .ending, .closed: return
        default:
            state = .ending
            endWithoutConnection()
        }
    }

    /// Closes the TCP connection if there is one (its close callback finishes), else finishes on the next turn.
    private func endWithoutConnection() {
        if let connection {
            connection.reset()
        } else {
            loop.enqueue { [self] in finishClose() }
        }
    }

    private func fail(_ kind: ClientStreamFailure.Kind, _ reason: String) {
        guard !failed else { return }
        failed = true
        switch state {
        case .ending, .closed: return
        default: break
        }
        state = .ending
        delegate?.stream(self, didFail: ClientStreamFailure(kind, reason))
        endWithoutConnection()
    }

    private func finishClose() {
        guard case .ending = state else { return }
        state = .closed
        connection = nil
        let delegate = delegate
        self.delegate = nil
        delegate?.streamDidClose(self)
    }

    // MARK: Connecting

    private func connectNext() {
        guard case .connecting(let addresses, let next, let lastReason) = state else { return }
        guard next < addresses.count else {
            fail(.connect, lastReason.isEmpty ? "cannot connect" : lastReason)
            return
        }
        state = .connecting(addresses: addresses, next: next + 1, lastReason: lastReason)
        do {
            connection = try TCPConnection.connect(on: loop, to: addresses[next], delegate: self)
        } catch {
            state = .connecting(addresses: addresses, next: next + 1, lastReason: error.reason)
            loop.enqueue { [self] in connectNext() }
        }
    }

    public func connectionDidConnect(_ connection: TCPConnection) {
        guard case .connecting = state else { return }
        // A server that vanished is found even while nothing is sent (the owner's own checks, such as HTTP/2 PING,
        // come on top).
        connection.setKeepAlive(idleSeconds: 30, intervalSeconds: 15)
        connection.startReading()
        guard let tlsSettings else {
            opened()
            return
        }
        let isAddress = ResolvedAddress.literal(tlsSettings.serverName, port: port) != nil
        guard let ssl = tlsSettings.context.session(host: tlsSettings.serverName, hostIsAddress: isAddress) else {
            fail(.handshake, "cannot set up TLS for the server's name")
            return
        }
        guard let bio = records.makeBIO() else {
            SSL_free(ssl)
            fail(.handshake, "cannot set up TLS for the server's name")
            return
        }
        SSL_set_bio(ssl, bio, bio)  // one BIO both ways: the SSL takes the one reference
        self.ssl = ssl
        buffer = .allocate(byteCount: 32 * 1024, alignment: 16)
        state = .handshaking
        handshake()
    }

    private func handshake() {
        guard let ssl else { return }
        let step = TLSHandshake.step(ssl)
        flushRecords()
        switch step {
        case .done:
            var selected: UnsafePointer<UInt8>?
            var length: UInt32 = 0
            SSL_get0_alpn_selected(ssl, &selected, &length)
            if let selected, length > 0 {
                negotiatedProtocol = String(
                    decoding: UnsafeBufferPointer(start: selected, count: Int(length)), as: UTF8.self)
            }
            opened()
        case .wantsReadable, .wantsWritable:
            break
        case .certificateRejected(let reason):
            fail(.certificate, reason)
        case .failed(let reason):
            fail(.handshake, reason)
        }
    }

    private func opened() {
        state = .open
        delegate?.streamDidConnect(self)
        guard case .open = state, !early.isEmpty else { return }
        let waiting = early
        early = []
        waiting.withUnsafeBytes { send($0) }
    }

    // MARK: Reading

    public func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        switch state {
        case .handshaking, .open: break
        default: return
        }
        guard let ssl, let buffer else {
            delegate?.stream(self, didRead: bytes)
            return
        }
        // OpenSSL reads the records where libuv put them, during this call (it keeps a partial record itself).
        records.reading(bytes) {
            if case .handshaking = state {
                handshake()
                guard case .open = state else { return }
            }
            while case .open = state {
                OpenSSLErrorQueue.clear()
                let count = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
                if count > 0 {
                    delegate?.stream(self, didRead: UnsafeRawBufferPointer(rebasing: buffer[0..<Int(count)]))
                    continue
                }
                switch SSL_get_error(ssl, count) {
                case SSL_ERROR_WANT_READ:
                    // Reading may have produced records to send (a key update's answer).
                    flushRecords()
                    return
                case SSL_ERROR_ZERO_RETURN:
                    fail(.closedByPeer, "the server closed the connection")
                default:
                    fail(.tls, OpenSSLErrorQueue.drain(keeping: 1).nonEmpty ?? "a TLS record could not be read")
                }
                return
            }
        }
    }

    public func connectionDidReachEnd(_ connection: TCPConnection) {
        switch state {
        case .handshaking: fail(.handshake, "the connection closed")
        case .open:
            if let writeFailure {
                fail(.reset, writeFailure.reason)
            } else {
                fail(.closedByPeer, "the server closed the connection")
            }
        default: break
        }
    }

    public func connection(_ connection: TCPConnection, didFail error: LoopError) {
        switch state {
        case .connecting:
            // Try the host's next address; the failed connection closes by itself.
            if case .connecting(let addresses, let next, _) = state {
                state = .connecting(addresses: addresses, next: next, lastReason: error.reason)
            }
            self.connection = nil
            connection.close()
            connectNext()
        case .handshaking:
            fail(.handshake, error.reason)
        case .open:
            // A write refused because the peer has closed (EPIPE): what it sent before closing may still wait in the
            // socket (an HTTP/2 GOAWAY saying which streams it never processed), and libuv reports the failed write
            // before it reads. Read on to the end of input; the failure is reported then.
            if error.code == .brokenPipe && connection.isReading {
                writeFailure = error
                return
            }
            fail(.reset, error.reason)
        default:
            break
        }
    }

    public func connectionDidFinishWriting(_ connection: TCPConnection) {
        guard case .open = state else { return }
        delegate?.streamDidFinishWriting(self)
    }

    public func connectionDidClose(_ connection: TCPConnection) {
        // A connection given up while connecting (another address is tried) is not the stream's end.
        guard connection === self.connection || self.connection == nil else { return }
        switch state {
        case .ending:
            finishClose()
        case .closed, .connecting:
            break
        default:
            // Closed under us (the loop is stopping): the owner hears a reset, then the close.
            fail(.reset, "the connection closed")
            finishClose()
        }
    }
}

extension String {
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}
