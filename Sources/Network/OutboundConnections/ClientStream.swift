import EventLoops
import Glibc
import MonotonicTime
import TLS

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

/// A client connection on one loop: plain TCP, or TLS (a ``TLS/TLSSession`` on a BIO of its own, ``TLS/StreamBIO``)
/// over a ``EventLoops/TCPConnection`` (docs/DESIGN.md, "C libraries and who owns what", says why over libuv), and
/// optionally through an HTTP proxy's `CONNECT` tunnel. libuv does every read and write; OpenSSL only turns records
/// into plaintext and back.
///
/// The I/O shell of a ``ClientStreamMachine``, which decides every step (the addresses tried in turn, the tunnel, the
/// handshake, the set-up's deadline, the end); this type carries out the actions each input returns.
///
/// Loop-bound: create it, call it and hear from it on its loop's thread only.
///
/// Ownership: while connecting, the pending resolution or TCP connection holds the stream; once connected, the
/// TCP connection holds it (as its delegate) until it has closed. The stream holds its delegate strongly until
/// ``ClientStreamDelegate/streamDidClose(_:)``, so an owner that keeps the stream must not be kept by it beyond
/// that (the usual shape: the owner holds the stream, the stream holds the owner until it closes). The set-up's
/// timer holds the stream weakly and is closed when the stream closes.
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

    /// An HTTP proxy to go through (`CONNECT host:port`).
    public typealias Proxy = ClientStreamMachine.Proxy

    public let loop: EventLoop
    private let port: UInt16
    private let tlsSettings: TLS?
    private var delegate: (any ClientStreamDelegate)?
    private var machine: ClientStreamMachine
    private var addresses: [ResolvedAddress] = []
    private var connection: TCPConnection?
    private var timer: LoopTimer?
    private var ssl: TLSSession?
    /// The records between OpenSSL and the connection (with TLS).
    private let records = StreamBIO()
    /// Plaintext written before the stream was open, sent once it is.
    private var early: [UInt8] = []
    private var buffer: UnsafeMutableRawBufferPointer?

    /// Bytes handed to ``write(_:)`` that are not in the kernel yet.
    public var queuedByteCount: Int { (connection?.queuedByteCount ?? 0) + early.count }

    /// The protocol agreed by ALPN, once connected with TLS.
    public private(set) var negotiatedProtocol: String?

    /// Connected and not ending.
    public var isOpen: Bool { inPlace { $0.isOpen } }

    /// Where the stream is (resolving, connecting, tunnelling, handshaking, open, ending, closed).
    public var phase: ClientStreamMachine.Phase { inPlace { $0.phase } }

    private init(
        loop: EventLoop, host: String, port: UInt16, tls: TLS?, proxy: Proxy?, deadline: Instant?,
        delegate: any ClientStreamDelegate
    ) {
        self.loop = loop
        self.port = port
        tlsSettings = tls
        self.delegate = delegate
        machine = ClientStreamMachine(host: host, port: port, usesTLS: tls != nil, proxy: proxy, deadline: deadline)
    }

    deinit {
        if let ssl { ssl.free() }  // frees its BIO with it, before `records` goes
        buffer?.deallocate()
    }

    /// Resolves `host` (on libuv's pool; an IP literal directly), connects to its addresses in order, then, with
    /// `tls`, handshakes. The delegate hears ``ClientStreamDelegate/streamDidConnect(_:)`` or
    /// ``ClientStreamDelegate/stream(_:didFail:)``, never before this returns. There is no timeout here: the
    /// caller keeps its own deadline and calls ``reset()``.
    public static func connect(
        on loop: EventLoop, host: String, port: UInt16, tls: TLS?, delegate: any ClientStreamDelegate
    ) -> ClientStream {
        connect(on: loop, host: host, port: port, tls: tls, proxy: nil, deadline: nil, delegate: delegate)
    }

    /// Connects as ``connect(on:host:port:tls:delegate:)``, through `proxy` when given: the proxy's name is resolved
    /// and connected to, it is asked for a tunnel to `host:port` by name (it resolves `host`), and TLS runs end to end
    /// inside the tunnel. A set-up not done by `deadline` (on ``EventLoops/EventLoop/monotonicNow()``) fails with
    /// words that say which step was late.
    public static func connect(
        on loop: EventLoop, host: String, port: UInt16, tls: TLS?, proxy: Proxy?, deadline: Instant?,
        delegate: any ClientStreamDelegate
    ) -> ClientStream {
        loop.preconditionCurrent()
        _ = brokenPipesIgnored
        let stream = ClientStream(
            loop: loop, host: host, port: port, tls: tls, proxy: proxy, deadline: deadline, delegate: delegate)
        stream.run(stream.machine.start(now: EventLoop.monotonicNow()))
        return stream
    }

    /// Once per process: libuv writes with `write(2)`, and a write to a connection the server has closed must fail
    /// with EPIPE, not kill the process with SIGPIPE (the HTTP server and the simulator set the same).
    private static let brokenPipesIgnored: Bool = {
        signal(SIGPIPE, SIG_IGN)
        return true
    }()

    // MARK: Asking the machine

    /// Asks the machine where it is stored: a non-mutating call on this class's stored machine copies the whole
    /// machine first (a retain and a release per reference it holds), and these are asked on every read and write.
    private func inPlace<Result>(_ question: (inout ClientStreamMachine) -> Result) -> Result {
        question(&machine)
    }

    private var isOpenNow: Bool { inPlace { $0.isOpen } }
    private var phaseNow: ClientStreamMachine.Phase { inPlace { $0.phase } }
    private var writingNow: ClientStreamMachine.Writing { inPlace { $0.writing } }

    // MARK: Carrying out the machine's actions

    private func run(_ actions: [ClientStreamMachine.Action]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: ClientStreamMachine.Action) {
        switch action {
        case .resolve(let host, let port):
            HostResolver.resolve(host: host, port: port, on: loop) { [self] result in
                switch result {
                case .success(let addresses):
                    self.addresses = addresses
                    run(machine.resolved(addressCount: addresses.count))
                case .failure(let error):
                    run(machine.resolveFailed(error.reason))
                }
            }
        case .armTimer(let deadline):
            let timer = self.timer ?? LoopTimer(on: loop) { [weak self] in self?.timerFired() }
            self.timer = timer
            timer.schedule(at: deadline)
        case .cancelTimer:
            timer?.cancel()
        case .connect(let index):
            do {
                connection = try TCPConnection.connect(on: loop, to: addresses[index], delegate: self)
            } catch {
                // Reported on the next turn, as an asynchronous failure would be.
                let reason = error.reason
                loop.enqueue { [self] in run(machine.connectFailed(reason)) }
            }
        case .abandonConnection:
            connection?.close()
            connection = nil
        case .startReading:
            // The owner's own checks (HTTP/2 PING) come on top of TCP keep-alive.
            connection?.setKeepAlive(idleSeconds: 30, intervalSeconds: 15)
            connection?.startReading()
        case .writePlain(let bytes):
            _ = bytes.withUnsafeBytes { connection?.write($0) }
        case .startTLS(let leftover):
            startTLS(leftover: leftover)
        case .open:
            opened()
        case .deliver(let bytes):
            bytes.withUnsafeBytes { delegate?.stream(self, didRead: $0) }
        case .fail(let failure):
            delegate?.stream(self, didFail: failure)
        case .closeGracefully:
            if let ssl {
                ssl.shutdown()
                flushRecords()
            }
            connection?.closeAfterWriting()
        case .end:
            if let connection {
                connection.reset()
            } else {
                loop.enqueue { [self] in run(machine.connectionClosed()) }
            }
        case .finish:
            connection = nil
            timer?.close()
            timer = nil
            let delegate = delegate
            self.delegate = nil
            delegate?.streamDidClose(self)
        }
    }

    private func timerFired() {
        run(machine.timerFired(now: EventLoop.monotonicNow()))
    }

    // MARK: Writing

    /// Sends `bytes` (plaintext): encrypted with TLS, written at once as far as the socket takes it, the rest
    /// queued. Before the stream is open, kept and sent once it is; after it has ended, dropped.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        loop.preconditionCurrent()
        guard !bytes.isEmpty else { return }
        switch writingNow {
        case .keep: early.append(contentsOf: bytes)
        case .send: send(bytes)
        case .drop: break
        }
    }

    /// Sends `bytes`, as ``write(_:)``.
    public func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { write($0) }
    }

    private func send(_ bytes: UnsafeRawBufferPointer) {
        guard let connection, writingNow == .send else { return }
        guard let ssl else {
            _ = connection.write(bytes)
            return
        }
        // A memory BIO takes everything, but with partial writes enabled (the client context enables them)
        // SSL_write returns after each record (16 KiB of plaintext): write until all of it is taken.
        var offset = 0
        while offset < bytes.count {
            switch ssl.write(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
            case .wrote(let written):
                offset += written
            case .failed(let reason):
                run(machine.tlsFailed(reason.nonEmpty ?? "a TLS record could not be written"))
                return
            case .wantsWritable, .wantsReadable:  // the stream's BIO takes every record
                run(machine.tlsFailed("a TLS record could not be written"))
                return
            }
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
        run(machine.close())
    }

    /// Ends the stream at once (a TCP reset once connected). The delegate hears only
    /// ``ClientStreamDelegate/streamDidClose(_:)``.
    public func reset() {
        loop.preconditionCurrent()
        run(machine.reset())
    }

    /// Ends the stream at once because its owner stops waiting for it: as ``reset()``, except that a stream still
    /// waiting for its proxy's answer fails first, with words naming the proxy (it did not answer in time).
    public func giveUp() {
        loop.preconditionCurrent()
        run(machine.giveUp())
    }

    // MARK: Connecting

    public func connectionDidConnect(_ connection: TCPConnection) {
        guard connection === self.connection else { return }
        run(machine.connected())
    }

    private func startTLS(leftover: [UInt8]) {
        guard let tlsSettings else { return }
        let isAddress = ResolvedAddress.literal(tlsSettings.serverName, port: port) != nil
        guard let ssl = tlsSettings.context.session(host: tlsSettings.serverName, hostIsAddress: isAddress) else {
            run(machine.handshake(.failed("cannot set up TLS for the server's name")))
            return
        }
        guard ssl.attach(records) else {  // one BIO both ways: the SSL takes the one reference
            ssl.free()
            run(machine.handshake(.failed("cannot set up TLS for the server's name")))
            return
        }
        self.ssl = ssl
        buffer = .allocate(byteCount: 32 * 1024, alignment: 16)
        handshake()
        // What the server sent right after the proxy's answer (its first records) is read as if just arrived.
        if !leftover.isEmpty, phaseNow == .handshaking {
            leftover.withUnsafeBytes { readTLS($0) }
        }
    }

    private func handshake() {
        guard let ssl else { return }
        let step = ssl.handshake()
        flushRecords()
        switch step {
        case .done:
            negotiatedProtocol = ssl.negotiatedProtocol
            run(machine.handshake(.done))
        case .wantsReadable, .wantsWritable:
            run(machine.handshake(.inProgress))
        case .certificateRejected(let reason):
            run(machine.handshake(.certificateRejected(reason)))
        case .failed(let reason):
            run(machine.handshake(.failed(reason)))
        }
    }

    private func opened() {
        delegate?.streamDidConnect(self)
        guard writingNow == .send, !early.isEmpty else { return }
        let waiting = early
        early = []
        waiting.withUnsafeBytes { send($0) }
    }

    // MARK: Reading

    public func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        switch phaseNow {
        case .tunnelling:
            run(machine.tunnelRead(bytes))
        case .handshaking, .open:
            readTLS(bytes)
        default:
            return
        }
    }

    private func readTLS(_ bytes: UnsafeRawBufferPointer) {
        guard let ssl, let buffer else {
            delegate?.stream(self, didRead: bytes)
            return
        }
        // OpenSSL reads the records where libuv put them, during this call (it keeps a partial record itself).
        records.reading(bytes) {
            if phaseNow == .handshaking {
                handshake()
                guard isOpenNow else { return }
            }
            while isOpenNow {
                switch ssl.read(into: buffer) {
                case .read(let count):
                    delegate?.stream(self, didRead: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                    continue
                case .wantsMore:
                    // Reading may have produced records to send (a key update's answer).
                    flushRecords()
                case .closed:
                    run(machine.tlsFailed("", closeNotify: true))
                case .failed(let reason):
                    run(machine.tlsFailed(reason.nonEmpty ?? "a TLS record could not be read"))
                }
                return
            }
        }
    }

    public func connectionDidReachEnd(_ connection: TCPConnection) {
        guard connection === self.connection else { return }
        run(machine.reachedEnd())
    }

    public func connection(_ connection: TCPConnection, didFail error: LoopError) {
        guard connection === self.connection else { return }
        run(
            machine.connectionFailed(
                error.reason, brokenPipeWhileReading: error.code == .brokenPipe && connection.isReading))
    }

    public func connectionDidFinishWriting(_ connection: TCPConnection) {
        guard connection === self.connection, isOpenNow else { return }
        delegate?.streamDidFinishWriting(self)
    }

    public func connectionDidClose(_ connection: TCPConnection) {
        // A connection given up while connecting (another address is tried) is not the stream's end.
        guard connection === self.connection else { return }
        run(machine.connectionClosed())
    }
}

extension String {
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}
