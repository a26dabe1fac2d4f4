import COpenSSL
import CUV
import Glibc
@_spi(Raw) import Loop

/// Issue 21's question, measured small: a TLS client on the loop with OpenSSL on memory BIOs over a
/// ``TCPConnection`` (libuv reads and writes), or OpenSSL on the socket itself with a `uv_poll_t` telling it
/// when to read. One connection to an echo server (`openssl s_server -rev`), 200-byte lines at a fixed
/// rate, every answer read; prints the process's CPU per request and its system calls are counted outside.
enum TLSClient {
    enum Shape: String {
        case memoryBIO = "tls-tcp"
        case socketPoll = "tls-poll"
    }

    static func run(shape: Shape, port: UInt16, rate: Int, seconds: Int) throws {
        let loop = try EventLoop(name: "spike-tls")
        try loop.performAndWait {
            let session = try Session(loop: loop, shape: shape, port: port, total: rate * seconds, rate: rate)
            session.begin()
        }
        while true { sleep(3600) }
    }

    final class Session: TCPConnectionDelegate {
        let loop: EventLoop
        let shape: Shape
        let ssl: OpaquePointer
        let total: Int
        let rate: Int
        var sent = 0
        var answered = 0
        var started: UInt64 = 0
        var connection: TCPConnection?
        var readBIO: OpaquePointer?
        var writeBIO: OpaquePointer?
        var poll: UnsafeMutablePointer<uv_poll_t>?
        var handshaken = false
        var ticker: LoopTimer?
        let line = [UInt8](repeating: UInt8(ascii: "x"), count: 199) + [10]
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        let port: UInt16

        init(loop: EventLoop, shape: Shape, port: UInt16, total: Int, rate: Int) throws {
            self.loop = loop
            self.shape = shape
            self.total = total
            self.rate = rate
            self.port = port
            let context = SSL_CTX_new(TLS_client_method())!
            SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
            ssl = SSL_new(context)!
            SSL_CTX_free(context)
        }

        func begin() {
            ticker = LoopTimer(on: loop) { [unowned self] in tick() }
            switch shape {
            case .memoryBIO:
                readBIO = BIO_new(BIO_s_mem())
                writeBIO = BIO_new(BIO_s_mem())
                SSL_set_bio(ssl, readBIO, writeBIO)
                SSL_set_connect_state(ssl)
                connection = try! TCPConnection.connect(on: loop, host: "127.0.0.1", port: port, delegate: self)
            case .socketPoll:
                // Connected and handshaken blocking, before the loop takes over (the measured part is after).
                let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = port.bigEndian
                address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
                _ = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                var one: Int32 = 1
                _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, 4)
                SSL_set_fd(ssl, descriptor)
                precondition(SSL_connect(ssl) == 1, "TLS handshake failed")
                _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
                let poll = UnsafeMutablePointer<uv_poll_t>.allocate(capacity: 1)
                uv_poll_init_socket(loop.uvLoop, poll, descriptor)
                // The poll handle holds the session until the process exits (nothing else does in this shape).
                poll.pointee.data = Unmanaged.passRetained(self).toOpaque()
                uv_poll_start(
                    poll, Int32(UV_READABLE.rawValue),
                    { poll, _, _ in
                        Unmanaged<Session>.fromOpaque(poll!.pointee.data).takeUnretainedValue().readRecords()
                    })
                self.poll = poll
                startSending()
            }
        }

        private func startSending() {
            handshaken = true
            started = EventLoop.monotonicNanoseconds()
            ticker?.schedule(afterMilliseconds: 1)
        }

        private func tick() {
            let elapsed = EventLoop.monotonicNanoseconds() - started
            let due = min(total, Int(elapsed / 1_000_000) * rate / 1_000 + 1)
            while sent < due {
                sent += 1
                _ = line.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
            }
            flush()
            if sent < total { ticker?.schedule(afterMilliseconds: 1) }
        }

        /// Memory BIO shape: moves what OpenSSL wrote into its BIO onto the connection.
        private func flush() {
            guard let writeBIO, let connection else { return }
            while BIO_ctrl_pending(writeBIO) > 0 {
                let count = BIO_read(writeBIO, buffer.baseAddress, Int32(buffer.count))
                guard count > 0 else { break }
                connection.write(UnsafeRawBufferPointer(rebasing: buffer[0..<Int(count)]))
            }
        }

        private func readRecords() {
            while true {
                let count = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
                guard count > 0 else { break }
                for byte in buffer[0..<Int(count)] where byte == 10 { answered += 1 }
            }
            ERR_clear_error()
            if answered >= total { finish() }
        }

        private func finish() {
            var usage = rusage()
            getrusage(RUSAGE_SELF.rawValue, &usage)
            let microseconds =
                Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6
                + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec)
            let text =
                "{\"shape\":\"\(shape.rawValue)\",\"requests\":\(total),\"cpu_us\":\(microseconds / Double(total))}\n"
            _ = write(STDOUT_FILENO, text, text.utf8.count)
            exit(0)
        }

        func connectionDidConnect(_ connection: TCPConnection) {
            connection.startReading()
            handshake()
        }

        private func handshake() {
            let result = SSL_do_handshake(ssl)
            flush()
            if result == 1 { startSending() }
        }

        func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
            _ = BIO_write(readBIO, bytes.baseAddress, Int32(bytes.count))
            if !handshaken {
                handshake()
                if !handshaken { return }
            }
            readRecords()
            flush()
        }

        func connectionDidReachEnd(_ connection: TCPConnection) { exit(1) }
        func connection(_ connection: TCPConnection, didFail error: LoopError) { exit(1) }
    }
}
