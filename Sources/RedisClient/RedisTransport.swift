import COpenSSL
import ClientTLS
import Glibc
import OpenSSLSupport

/// One connection's byte stream: a non-blocking TCP socket, with OpenSSL on it for `rediss://`.
///
/// Owns the socket and the `SSL` (closed and freed by ``close()`` or `deinit`). Used only by the
/// pipeline's I/O thread.
final class RedisTransport {
    enum Progress {
        case done(Int)
        /// Nothing now; poll for readability (`wantsWrite == false`) or writability.
        case wouldBlock(wantsWrite: Bool)
        case closed
        case failed(RedisClientError)
    }

    /// -1 once closed: `close()` may run twice (explicitly, then from `deinit`), and the descriptor's
    /// number may by then belong to another file.
    private(set) var socket: Int32
    private var ssl: OpaquePointer?

    private init(socket: Int32) {
        self.socket = socket
    }

    deinit { close() }

    func close() {
        if let ssl {
            // A quiet shutdown: no close_notify wait on a connection that is being dropped.
            SSL_set_quiet_shutdown(ssl, 1)
            SSL_free(ssl)
            self.ssl = nil
        }
        if socket >= 0 {
            _ = Glibc.close(socket)
            socket = -1
        }
    }

    /// Connects to `host:port` (the addresses in the resolver's order) within `deadline`
    /// (monotonic nanoseconds), then, with `tls`, completes a verified handshake.
    static func connect(
        host: String, port: UInt16, tls: TLSClientContext?, deadline: UInt64
    ) -> Result<RedisTransport, RedisClientError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0 else {
            return .failure(
                RedisClientError(.refused, "cannot resolve the host: \(String(cString: gai_strerror(status)))"))
        }
        defer { freeaddrinfo(list) }
        var problem = RedisClientError(.refused, "the host has no address")
        var entry = list
        while let current = entry {
            entry = current.pointee.ai_next
            switch connectOne(current.pointee, deadline: deadline) {
            case .success(let descriptor):
                let transport = RedisTransport(socket: descriptor)
                guard let tls else { return .success(transport) }
                if let failure = transport.handshake(tls, host: host, deadline: deadline) { return .failure(failure) }
                return .success(transport)
            case .failure(let error):
                problem = error
            }
        }
        return .failure(problem)
    }

    private static func connectOne(_ address: addrinfo, deadline: UInt64) -> Result<Int32, RedisClientError> {
        let descriptor = Glibc.socket(
            address.ai_family,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
            0)
        guard descriptor >= 0 else { return .failure(RedisClientError(.refused, "socket: \(describe(errno))")) }
        if Glibc.connect(descriptor, address.ai_addr, address.ai_addrlen) != 0 {
            guard errno == EINPROGRESS else {
                let error = errno
                _ = Glibc.close(descriptor)
                return .failure(RedisClientError(.refused, "cannot connect: \(describe(error))"))
            }
            guard wait(descriptor, events: Int16(POLLOUT), deadline: deadline) else {
                _ = Glibc.close(descriptor)
                return .failure(RedisClientError(.timeout, "no connection within the connect timeout"))
            }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0 else {
                _ = Glibc.close(descriptor)
                return .failure(RedisClientError(.refused, "cannot connect: \(describe(error))"))
            }
        }
        func set(_ level: Int32, _ option: Int32, _ value: Int32) {
            var value = value
            _ = setsockopt(descriptor, level, option, &value, socklen_t(MemoryLayout<Int32>.size))
        }
        // Small commands go out at once; TCP keep-alive finds a connection that died silently.
        set(Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        set(SOL_SOCKET, SO_KEEPALIVE, 1)
        set(Int32(IPPROTO_TCP), TCP_KEEPIDLE, 30)
        set(Int32(IPPROTO_TCP), TCP_KEEPINTVL, 10)
        return .success(descriptor)
    }

    private func handshake(_ tls: TLSClientContext, host: String, deadline: UInt64) -> RedisClientError? {
        let isAddress =
            host.contains(":") || host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." }
        guard let ssl = tls.session(socket: socket, host: host, hostIsAddress: isAddress) else {
            return RedisClientError(.tls, "cannot set up the TLS connection's name check")
        }
        self.ssl = ssl
        while true {
            let wantsWrite: Bool
            switch TLSHandshake.step(ssl) {
            case .done: return nil
            case .wantsReadable: wantsWrite = false
            case .wantsWritable: wantsWrite = true
            case .certificateRejected(let text):
                return RedisClientError(.tls, "the server's certificate was not accepted: \(text)")
            case .failed:
                return RedisClientError(.tls, "the TLS handshake failed")
            }
            guard Self.wait(socket, events: Int16(wantsWrite ? POLLOUT : POLLIN), deadline: deadline) else {
                return RedisClientError(.timeout, "no TLS handshake within the connect timeout")
            }
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> Progress {
        if let ssl {
            ERR_clear_error()
            let count = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
            if count > 0 { return .done(Int(count)) }
            return tlsProgress(ssl, count)
        }
        let count = recv(socket, buffer.baseAddress, buffer.count, 0)
        if count > 0 { return .done(count) }
        if count == 0 { return .closed }
        return plainProgress(errno, wantsWrite: false)
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Progress {
        if let ssl {
            ERR_clear_error()
            let count = SSL_write(ssl, bytes.baseAddress, Int32(clamping: bytes.count))
            if count > 0 { return .done(Int(count)) }
            return tlsProgress(ssl, count)
        }
        let count = send(socket, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
        if count >= 0 { return .done(count) }
        return plainProgress(errno, wantsWrite: true)
    }

    private func plainProgress(_ error: Int32, wantsWrite: Bool) -> Progress {
        switch error {
        case EAGAIN, EWOULDBLOCK, EINTR: return .wouldBlock(wantsWrite: wantsWrite)
        default: return .failed(RedisClientError(.closed, "the connection broke: \(Self.describe(error))"))
        }
    }

    private func tlsProgress(_ ssl: OpaquePointer, _ result: Int32) -> Progress {
        let code = SSL_get_error(ssl, result)
        ERR_clear_error()
        switch code {
        case SSL_ERROR_WANT_READ: return .wouldBlock(wantsWrite: false)
        case SSL_ERROR_WANT_WRITE: return .wouldBlock(wantsWrite: true)
        case SSL_ERROR_ZERO_RETURN: return .closed
        default: return .failed(RedisClientError(.closed, "the TLS connection broke"))
        }
    }

    /// Polls one descriptor until `events` or `deadline`; false on timeout.
    static func wait(_ descriptor: Int32, events: Int16, deadline: UInt64) -> Bool {
        while true {
            let now = Monotonic.now
            guard now < deadline else { return false }
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let milliseconds = Int32(clamping: (deadline - now + 999_999) / 1_000_000)
            let result = poll(&entry, 1, milliseconds)
            if result > 0 { return true }
            if result < 0 && errno != EINTR { return true }
        }
    }

    static func describe(_ error: Int32) -> String { String(cString: strerror(error)) }
}

/// Monotonic nanoseconds.
enum Monotonic {
    static var now: UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }
}
