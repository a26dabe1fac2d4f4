import CUV
import Glibc

/// A listening TCP socket on one loop, with `SO_REUSEPORT`: several loops (one per worker) each open a
/// listener on the same address and port, and the kernel spreads new connections among them.
///
/// Each accepted connection is a ``TCPConnection`` of this listener's loop, handed to `onConnection` with
/// `TCP_NODELAY` set and reading not yet started: set its delegate and call
/// ``TCPConnection/startReading()``, or close it (over a cap). Loop-bound: use only on its loop's thread.
///
/// libuv 1.44 has no `UV_TCP_REUSEPORT`, so the socket is made, configured and bound here and handed to
/// `uv_tcp_open`; libuv owns the descriptor from then on and closes it with the handle.
public final class TCPListener: LoopHandle {
    /// The port bound (the one the kernel chose when 0 was asked for).
    public let port: UInt16
    private var onConnection: ((TCPConnection) -> Void)?

    /// Binds and listens on `host` (an IPv4 or IPv6 literal, brackets allowed; `::` accepts IPv4 too) and
    /// `port` (0: any free port; bind another loop's listener to the port found here to share it).
    public convenience init(
        on loop: EventLoop, host: String, port: UInt16, backlog: Int32 = 511,
        onConnection: @escaping (TCPConnection) -> Void
    ) throws(LoopError) {
        let socket = try Self.bindSocket(host: host, port: port)
        try self.init(on: loop, adopting: socket.descriptor, backlog: backlog, onConnection: onConnection)
    }

    /// Listens on a socket made by ``bindSocket(host:port:)`` (on another thread: in a network namespace,
    /// or before privileges are dropped). The listener owns the descriptor from here, also when this throws.
    public init(
        on loop: EventLoop, adopting descriptor: Int32, backlog: Int32 = 511,
        onConnection: @escaping (TCPConnection) -> Void
    ) throws(LoopError) {
        port = Self.boundPort(of: descriptor) ?? 0
        self.onConnection = onConnection
        super.init(loop: loop, type: UV_TCP)
        uv_tcp_init(loop.raw, tcp)
        let opened = uv_tcp_open(tcp, descriptor)
        guard opened == 0 else {
            // The handle holds no descriptor: close both, and the handle so that the loop forgets it.
            Glibc.close(descriptor)
            didOpen()
            close()
            throw LoopError(status: opened, "cannot listen on port \(port)", code: .listenFailed)
        }
        didOpen()
        let listening = uv_listen(
            CUV_stream(tcp), backlog,
            { server, status in
                unsafeDowncast(LoopHandle.owner(of: server!), to: TCPListener.self).accept(status: status)
            })
        guard listening == 0 else {
            close()
            throw LoopError(status: listening, "cannot listen on port \(port)", code: .listenFailed)
        }
    }

    private var tcp: UnsafeMutablePointer<uv_tcp_t> {
        handle!.assumingMemoryBound(to: uv_tcp_t.self)
    }

    /// Stops accepting: the listening socket closes (connections already accepted stay open; with
    /// `SO_REUSEPORT`, the other loops' listeners keep accepting). Used to drain on SIGTERM.
    public func stopAccepting() {
        close()
    }

    /// Makes a socket bound to `host` and `port` with `SO_REUSEPORT` (and `SO_REUSEADDR`), non-blocking and
    /// close-on-exec, not yet listening: for ``init(on:adopting:backlog:onConnection:)``, or to be closed.
    /// Any thread. `port` 0 picks a free port; the port bound is returned.
    /// With `sharingPort` false, no `SO_REUSEPORT`: a port already in use is an error even when this process
    /// holds it (for one listener whose connections are handed to other loops with
    /// ``TCPConnection/adopt(_:on:)``).
    public static func bindSocket(
        host: String, port: UInt16, sharingPort: Bool = true
    ) throws(LoopError) -> (descriptor: Int32, port: UInt16) {
        let address = try SocketAddress(host: host, port: port)
        let endpoint = address.endpoint(port: port)
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let descriptor = socket(address.family, type, 0)
        guard descriptor >= 0 else {
            throw LoopError(status: -errno, "cannot open a socket for \(endpoint)", code: .listenFailed)
        }
        var one: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, size)
        guard !sharingPort || setsockopt(descriptor, SOL_SOCKET, SO_REUSEPORT, &one, size) == 0 else {
            let status = -errno
            Glibc.close(descriptor)
            throw LoopError(status: status, "cannot set SO_REUSEPORT for \(endpoint)", code: .listenFailed)
        }
        if address.family == AF_INET6 {
            // "::" accepts IPv4 too (peers then appear as IPv4); any other IPv6 address is IPv6 only.
            var only: Int32 = address.isIPv6Wildcard ? 0 : 1
            _ = setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &only, size)
        }
        let result = address.withSocketAddress { bind(descriptor, $0, address.length) }
        guard result == 0 else {
            let status = -errno
            Glibc.close(descriptor)
            throw LoopError(status: status, "cannot bind \(endpoint)", code: .listenFailed)
        }
        return (descriptor, boundPort(of: descriptor) ?? port)
    }

    private static func boundPort(of descriptor: Int32) -> UInt16? {
        var bound = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard status == 0 else { return nil }
        return withUnsafePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { IPAddress.read($0)?.port }
        }
    }

    private func accept(status: Int32) {
        // A failed accept (EMFILE: libuv has already refused the waiting connections) is retried by libuv on
        // the next readiness; nothing to hand over.
        guard status == 0, !isClosing else { return }
        let connection = TCPConnection(acceptingOn: loop)
        guard uv_accept(CUV_stream(tcp), connection.stream) == 0 else {
            connection.close()
            return
        }
        connection.accepted()
        onConnection?(connection)
    }

    override func didClose() {
        onConnection = nil
    }
}
