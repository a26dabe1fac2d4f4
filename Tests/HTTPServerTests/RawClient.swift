import Glibc

/// A blocking TCP client for tests: sends raw bytes and reads responses, with a receive timeout so a test fails
/// instead of hanging.
final class RawClient {
    struct Response {
        var status: Int
        var headers: [(name: String, value: String)]
        var body: [UInt8]

        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        var text: String { String(decoding: body, as: UTF8.self) }
    }

    enum Failure: Error {
        case connect(Int32)
        case closed
        case timeout
        case malformed(String)
    }

    let descriptor: Int32
    private var buffer: [UInt8] = []

    init(host: String = "127.0.0.1", port: UInt16, timeoutSeconds: Int = 10) throws {
        var v4 = in_addr()
        var v6 = in6_addr()
        let family = inet_pton(AF_INET, host, &v4) == 1 ? AF_INET : AF_INET6
        if family == AF_INET6 { _ = inet_pton(AF_INET6, host, &v6) }
        // A local until connected: once every stored property is set, a throwing init runs deinit, which
        // would close the number a second time (by then possibly another file's).
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let result: Int32
        if family == AF_INET {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr = v4
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        } else {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = v6
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
        if result != 0 {
            let code = errno
            close(descriptor)
            throw Failure.connect(code)
        }
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }

    func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, 0) }
            if sent <= 0 { throw Failure.closed }
            offset += sent
        }
    }

    /// Reads more bytes into the buffer; false at end of stream (or reset).
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            buffer += chunk[0..<count]
            return true
        }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw Failure.timeout }
        return false
    }

    /// Reads one response (Content-Length framed, or no body for HEAD when `expectBody` is false).
    func readResponse(expectBody: Bool = true) throws -> Response {
        let terminator: [UInt8] = Array("\r\n\r\n".utf8)
        var end: Int?
        while true {
            if let found = buffer.firstRange(of: terminator) {
                end = found.upperBound
                break
            }
            if try !fill() { throw Failure.closed }
        }
        let headText = String(decoding: buffer[0..<end!], as: UTF8.self)
        buffer.removeFirst(end!)
        var lines = headText.split(separator: "\r\n", omittingEmptySubsequences: true)
        guard !lines.isEmpty else { throw Failure.malformed(headText) }
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw Failure.malformed(headText) }
        let headers = lines.map { line -> (name: String, value: String) in
            let parts = line.split(separator: ":", maxSplits: 1)
            return (
                String(parts[0]),
                parts.count > 1 ? String(parts[1]).trimmingCharacters(in: " ") : ""
            )
        }
        var response = Response(status: status, headers: headers, body: [])
        if expectBody, let length = response.header("content-length").flatMap({ Int($0) }) {
            while buffer.count < length {
                if try !fill() { throw Failure.closed }
            }
            response.body = Array(buffer[0..<length])
            buffer.removeFirst(length)
        }
        return response
    }

    /// True when the server closes the connection (end of stream or reset) before any more bytes arrive.
    func isClosedByServer() throws -> Bool {
        if !buffer.isEmpty { return false }
        return try !fill()
    }
}

extension String {
    func trimmingCharacters(in set: Character) -> String {
        var text = Substring(self)
        while text.first == set { text.removeFirst() }
        while text.last == set { text.removeLast() }
        return String(text)
    }
}
