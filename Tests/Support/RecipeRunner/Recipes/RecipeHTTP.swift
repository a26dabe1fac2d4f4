import Foundation
import Glibc
import HTTP1

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
        let bytes = exchange(port: proxyPort, request: Array(head.utf8), seconds: seconds) { bytes in
            var reader = reader(of: bytes)
            return reader.next() != .needMoreBytes
        }
        return bytes.flatMap { status(ofHead: $0) }
    }

    /// The status of a whole head (`HTTP/1.1 200 OK`, its fields and the blank line); nil for anything that is not
    /// an HTTP/1.1 answer's head.
    static func status(ofHead bytes: [UInt8]) -> Int? {
        var reader = reader(of: bytes)
        switch reader.next() {
        case .head(let head), .interim(let head): return head.status
        default: return nil
        }
    }

    /// A whole answer read to the connection's end: its status and body (a chunked body decoded; one framed by
    /// neither a length nor chunks is everything up to the end).
    static func parse(_ bytes: [UInt8]) -> Answer? {
        var reader = reader(of: bytes)
        reader.finishInput()
        guard case .complete(let head, let body) = reader.nextResponse() else { return nil }
        return Answer(status: head.status, body: body)
    }

    /// Whether `bytes` hold a whole answer by its own framing (a length, or a chunked body's last chunk), so that a
    /// server that keeps the connection open is not waited for; one framed by the connection's end is whole at it.
    static func isComplete(_ bytes: [UInt8]) -> Bool {
        var reader = reader(of: bytes)
        if case .complete = reader.nextResponse() { return true }
        return false
    }

    /// A reader holding `bytes`: the relays' answers, /metrics included, and a proxy's answer to CONNECT.
    private static func reader(of bytes: [UInt8]) -> HTTP1ResponseReader {
        var reader = HTTP1ResponseReader(
            limits: HTTP1ResponseReader.Limits(maxBodyBytes: 16 << 20, bodyMayEndWithConnection: true))
        reader.append(contentsOf: bytes)
        return reader
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
