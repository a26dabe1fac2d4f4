import Foundation
import Glibc

/// HTTP/1.1 over TCP to 127.0.0.1, one request per connection (`Connection: close`), bounded by a deadline: the
/// relays' /healthz, /readyz and /metrics, grants and pushes with the client address a header names, and
/// tinyproxy's answer to a CONNECT.
enum RecipeHTTP {
    struct Answer: Equatable {
        var status: Int
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// One GET of `url` (`http://127.0.0.1:PORT/PATH`); nil when it names another host or no whole answer came
    /// within `seconds`.
    static func get(_ url: String, seconds: Double = 2) -> Answer? {
        guard let (port, path) = loopback(url) else { return nil }
        return request("GET", port: port, path: path, seconds: seconds)
    }

    /// The port and path of a URL of 127.0.0.1 (`http://127.0.0.1:8787/healthz`); nil for any other.
    static func loopback(_ url: String) -> (port: Int, path: String)? {
        let prefix = "http://127.0.0.1:"
        guard url.hasPrefix(prefix) else { return nil }
        let rest = url.dropFirst(prefix.count)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        guard let port = Int(rest[..<slash]), (1...65535).contains(port) else { return nil }
        return (port, slash == rest.endIndex ? "/" : String(rest[slash...]))
    }

    /// Whether 127.0.0.1:`port` answers `path` 200 within `seconds` (each try bounded to 2 s).
    static func answers200(port: Int, path: String, within seconds: Double = 30) -> Bool {
        RecipeClock.within(seconds) { request("GET", port: port, path: path, seconds: 2)?.status == 200 }
    }

    /// Whether `url` (`http://127.0.0.1:PORT/PATH`) answers 200 within `seconds`.
    static func answers200(_ url: String, within seconds: Double = 30) -> Bool {
        guard let (port, path) = loopback(url) else { return false }
        return answers200(port: port, path: path, within: seconds)
    }

    /// One request to 127.0.0.1:`port`; nil if no whole answer came within `seconds`.
    static func request(
        _ method: String, port: Int, path: String, headers: [(String, String)] = [], body: [UInt8] = [],
        seconds: Double
    ) -> Answer? {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        guard
            let bytes = exchange(port: port, request: Array(head.utf8) + body, seconds: seconds, until: isComplete)
        else { return nil }
        return parse(bytes)
    }

    /// The status of the answer of the proxy at 127.0.0.1:`proxyPort` to `CONNECT target` (curl's `http_connect`);
    /// nil if it gave none within `seconds`.
    static func connectStatus(proxyPort: Int, target: String, seconds: Double) -> Int? {
        let head = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n\r\n"
        let bytes = exchange(port: proxyPort, request: Array(head.utf8), seconds: seconds) { headEnd($0) != nil }
        return bytes.flatMap { status(ofHead: $0) }
    }

    /// The status of a head's first line (`HTTP/1.1 200 OK`).
    static func status(ofHead bytes: [UInt8]) -> Int? {
        let line = String(
            decoding: bytes.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        let parts = line.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else { return nil }
        return status
    }

    /// A whole answer read to the connection's end: its status and body (a chunked body decoded).
    static func parse(_ bytes: [UInt8]) -> Answer? {
        guard let end = headEnd(bytes), let status = status(ofHead: bytes) else { return nil }
        let head = String(decoding: bytes[..<end], as: UTF8.self).lowercased()
        var body = Array(bytes[(end + 4)...])
        if head.contains("\r\ntransfer-encoding: chunked") {
            guard let decoded = dechunk(body) else { return nil }
            body = decoded
        } else if let length = contentLength(head) {
            guard body.count >= length else { return nil }
            body = Array(body.prefix(length))
        }
        return Answer(status: status, body: body)
    }

    /// Whether `bytes` hold a whole answer by its own framing (a length, or a chunked body's last chunk), so that a
    /// server that keeps the connection open is not waited for; one framed by the connection's end is whole at it.
    static func isComplete(_ bytes: [UInt8]) -> Bool {
        guard let end = headEnd(bytes) else { return false }
        let head = String(decoding: bytes[..<end], as: UTF8.self).lowercased()
        let body = Array(bytes[(end + 4)...])
        if head.contains("\r\ntransfer-encoding: chunked") { return dechunk(body) != nil }
        guard let length = contentLength(head) else { return false }
        return body.count >= length
    }

    static func contentLength(_ head: String) -> Int? {
        head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
    }

    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        return (0...(bytes.count - 4)).first { bytes[$0..<($0 + 4)].elementsEqual("\r\n\r\n".utf8) }
    }

    static func dechunk(_ bytes: [UInt8]) -> [UInt8]? {
        var body: [UInt8] = []
        var index = 0
        while true {
            guard
                let lineEnd = (index..<max(index, bytes.count - 1)).first(where: {
                    bytes[$0] == 13 && bytes[$0 + 1] == 10
                }),
                let size = Int(
                    String(decoding: bytes[index..<lineEnd], as: UTF8.self).split(separator: ";").first ?? "", radix: 16
                )
            else { return nil }
            if size == 0 { return body }
            let start = lineEnd + 2
            guard start + size + 2 <= bytes.count else { return nil }
            body += bytes[start..<(start + size)]
            index = start + size + 2
        }
    }

    /// Sends `request` and reads until the peer closes or `done` holds for what came; nil on any failure or when
    /// `seconds` pass.
    private static func exchange(port: Int, request: [UInt8], seconds: Double, until done: ([UInt8]) -> Bool)
        -> [UInt8]?
    {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        let deadline = RecipeClock.now() + seconds
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1e6))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { return nil }
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes {
                send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard count > 0 else { return nil }
            sent += count
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while RecipeClock.now() < deadline {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return answer }
            guard count > 0 else { return nil }
            answer += buffer[..<count]
            if done(answer) { return answer }
        }
        return nil
    }
}
