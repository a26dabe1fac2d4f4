import ErrorCodes
import Foundation
import HTTP1

#if canImport(Glibc)
    import Glibc
#endif

/// A blocking HTTP/1.1 client over one TCP connection, for the tests of the HTTP server and of the relay
/// binary: they need control that URLSession does not give (exact bytes, keep-alive, half-sent requests,
/// seeing the server close). Every read has a receive timeout, so a test fails instead of hanging.
public final class RawHTTPClient: @unchecked Sendable {
    // @unchecked: a connection is used by one thread at a time (tests hand it over, never share it).
    public let descriptor: Int32
    /// The answers read so far: every byte received goes through it.
    private var reader = HTTP1ResponseReader(limits: RawHTTPClient.answerLimits)
    /// A test may read `/metrics` or a large echo; the relay frames every answer by its length.
    static let answerLimits = HTTP1ResponseReader.Limits(maxBodyBytes: 64 << 20, bodyMayEndWithConnection: true)

    public struct Response: Sendable {
        public var status: Int
        /// Every header line in order, names as sent.
        public var fields: [(name: String, value: String)]
        public var body: [UInt8]

        /// The headers by lowercase name; of a repeated name, the last line.
        public var headers: [String: String] {
            Dictionary(fields.map { ($0.name.lowercased(), $0.value) }) { _, last in last }
        }

        /// The first value of the header `name`, by any case.
        public func header(_ name: String) -> String? {
            fields.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        public var text: String { String(decoding: body, as: UTF8.self) }
        public var json: [String: Any]? { try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] }
        /// The `error` member of a JSON answer.
        public var error: String? { json?["error"] as? String }
    }

    public enum Failure: CodedError {
        case socket(Int32)
        case bind(String)
        case connect(Int32)
        case closed
        case timeout
        case malformed(String)

        public var code: ErrorCode<Failure> {
            switch self {
            case .socket: ErrorCode("socket")
            case .bind: ErrorCode("bind")
            case .connect: ErrorCode("connect")
            case .closed: ErrorCode("closed")
            case .timeout: ErrorCode("timeout")
            case .malformed: ErrorCode("malformed")
            }
        }

        public var description: String { reason }

        public var reason: String {
            switch self {
            case .socket(let code): "socket failed (errno \(code))"
            case .bind(let source): "bind to \(source) failed"
            case .connect(let code): "connect failed (errno \(code))"
            case .closed: "connection closed while sending or reading"
            case .timeout: "no answer within the receive timeout"
            case .malformed(let head): "malformed response head: \(head)"
            }
        }
    }

    /// - Parameters:
    ///   - host: an IPv4 or IPv6 address.
    ///   - source: a loopback IPv4 address to connect from (e.g. 127.0.0.2), so one machine can play
    ///     several clients.
    ///   - timeoutSeconds: how long one read waits for bytes.
    public init(port: UInt16, host: String = "127.0.0.1", source: String? = nil, timeoutSeconds: Int = 20) throws {
        var v4 = in_addr()
        var v6 = in6_addr()
        let isIPv4 = inet_pton(AF_INET, host, &v4) == 1
        if !isIPv4 { _ = inet_pton(AF_INET6, host, &v6) }
        // A local until connected: a throwing init runs deinit once every stored property is set, which would
        // close the number a second time (by then possibly another file's, such as a server's eventfd).
        let descriptor = socket(isIPv4 ? AF_INET : AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure.socket(errno) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if let source {
            // The port is chosen at connect, for the whole address pair, as for an unbound socket: a test that
            // opens tens of thousands of connections from one source address must not run out of ports for bind.
            var late: Int32 = 1
            _ = setsockopt(descriptor, Int32(IPPROTO_IP), 24 /* IP_BIND_ADDRESS_NO_PORT */, &late, 4)
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, source, &local.sin_addr)
            guard Self.withAddress(&local, { bind(descriptor, $0, $1) }) == 0 else {
                close(descriptor)
                throw Failure.bind(source)
            }
        }
        let result: Int32
        if isIPv4 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr = v4
            result = Self.withAddress(&address) { connect(descriptor, $0, $1) }
        } else {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = v6
            result = Self.withAddress(&address) { connect(descriptor, $0, $1) }
        }
        guard result == 0 else {
            let code = errno
            close(descriptor)
            throw Failure.connect(code)
        }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    private static func withAddress<Address>(
        _ address: inout Address, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32
    ) -> Int32 {
        withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<Address>.size)) }
        }
    }

    /// This end's port: part of the client address the relay must never print.
    public var localPort: UInt16 {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { throw Failure.closed }
            offset += sent
        }
    }

    /// Sends one request (``encode(_:_:body:headers:)``) and reads its answer.
    public func request(
        _ method: String, _ path: String, body: [UInt8] = [], headers: [String: String] = [:]
    ) throws -> Response {
        try send(Self.encode(method, path, body: body, headers: headers))
        return try readResponse()
    }

    /// A request's bytes: `Host: relay`, the given headers, and a Content-Length for a body or any POST.
    public static func encode(_ method: String, _ path: String, body: [UInt8], headers: [String: String]) -> [UInt8] {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: relay\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" { text += "Content-Length: \(body.count)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }

    /// Reads one response (an interim one too), framed as its head says, or without a body when `expectBody` is
    /// false (the answer to HEAD). Throws on bytes that are not an HTTP/1.1 answer, or when the connection ends
    /// first.
    public func readResponse(expectBody: Bool = true) throws -> Response {
        var head: HTTP1ResponseHead?
        while true {
            switch reader.next() {
            case .needMoreBytes:
                guard try fill() else {
                    reader.finishInput()
                    continue
                }
            case .interim(let interim):
                return Self.response(interim, body: [])
            case .head(let final):
                head = final
                reader.readBody(headRequest: !expectBody)
            case .body(let body):
                guard let head else { throw Failure.malformed("a body without a head") }
                return Self.response(head, body: body)
            case .end:
                throw Failure.closed
            case .failed(let error):
                if error.code == .truncated { throw Failure.closed }
                throw Failure.malformed(error.reason)
            }
        }
    }

    private static func response(_ head: HTTP1ResponseHead, body: [UInt8]) -> Response {
        Response(status: head.status, fields: head.headers.fields.map { (name: $0.name, value: $0.value) }, body: body)
    }

    /// True once the server has closed the connection (end of stream or reset) before sending any more
    /// bytes. It waits up to `seconds` for that when given, else up to the receive timeout.
    public func isClosedByPeer(within seconds: Double? = nil) -> Bool {
        guard reader.bufferedByteCount == 0 else { return false }
        if let seconds {
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, Int32(seconds * 1000)) == 1 else { return false }
        }
        do { return try !fill() } catch { return false }
    }

    /// Reads more bytes into the buffer; false at end of stream or reset, throws at the receive timeout.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            reader.append(contentsOf: chunk[..<count])
            return true
        }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw Failure.timeout }
        return false
    }
}
