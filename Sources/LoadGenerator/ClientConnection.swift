import Glibc

/// One non-blocking HTTP/1.1 keep-alive client connection with one request in flight at a time.
///
/// The response reader is deliberately small (this is a test tool): a status line, headers scanned
/// for `Content-Length`, and that many body bytes. The relay always answers with a length.
final class ClientConnection {
    /// A complete answer.
    struct Response {
        var status: Int
        var body: ArraySlice<UInt8>
    }

    let fd: Int32
    private(set) var connected = false
    /// When the request in flight was due (open loop) or sent (closed loop), monotonic nanoseconds.
    var requestStart: UInt64 = 0
    /// Whether a request is in flight.
    var busy = false
    private var outbound: [UInt8] = []
    private var outboundOffset = 0
    private var inbound: [UInt8] = []

    /// Starts a non-blocking connect; nil if the socket cannot even be created.
    init?(to address: sockaddr_in) {
        // A local until the connect has started: once every stored property is set, a failing init runs deinit,
        // which would close the number a second time (by then possibly another file's).
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var target = address
        let result = withUnsafePointer(to: &target) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if result != 0 && errno != EINPROGRESS {
            close(fd)
            return nil
        }
        self.fd = fd
        connected = result == 0
    }

    deinit { close(fd) }

    /// Called when the socket turns writable while connecting: true once connected.
    func finishConnect() -> Bool {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0, error == 0 else { return false }
        connected = true
        return true
    }

    /// Whether bytes are still waiting to be written.
    var wantsWrite: Bool { outboundOffset < outbound.count }

    /// Queues a request and writes what the socket takes; false if the connection broke.
    func send(_ request: [UInt8]) -> Bool {
        if outboundOffset == outbound.count {
            outbound = request
            outboundOffset = 0
        } else {
            outbound.append(contentsOf: request)
        }
        busy = true
        return flush()
    }

    /// Writes pending bytes; false if the connection broke.
    func flush() -> Bool {
        while outboundOffset < outbound.count {
            let written = outbound.withUnsafeBytes { bytes in
                Glibc.send(fd, bytes.baseAddress! + outboundOffset, bytes.count - outboundOffset, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                outboundOffset += written
            } else if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                return true
            } else if written < 0 && errno == EINTR {
                continue
            } else {
                return false
            }
        }
        return true
    }

    /// Reads what has arrived and returns the answers completed by it; nil once the peer closed or failed.
    func readResponses() -> [Response]? {
        let chunkSize = 16384
        var closed = false
        while true {
            var count = 0
            inbound.reserveCapacity(inbound.count + chunkSize)
            let chunk = [UInt8](unsafeUninitializedCapacity: chunkSize) { buffer, initialized in
                count = recv(fd, buffer.baseAddress, chunkSize, 0)
                initialized = max(count, 0)
            }
            if count > 0 {
                inbound.append(contentsOf: chunk)
                if count < chunkSize { break }
            } else if count == 0 {
                closed = true
                break
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                break
            } else {
                closed = true
                break
            }
        }
        var responses: [Response] = []
        var consumed = 0
        while let (response, length) = Self.parse(inbound[consumed...]) {
            responses.append(response)
            consumed += length
        }
        if consumed > 0 {
            inbound.removeFirst(consumed)
            busy = false
        }
        if closed && responses.isEmpty { return nil }
        return responses
    }

    /// One complete response at the start of `bytes`, and its length; nil if incomplete.
    static func parse(_ bytes: ArraySlice<UInt8>) -> (Response, Int)? {
        guard let headEnd = find([13, 10, 13, 10], in: bytes) else { return nil }
        let start = bytes.startIndex
        // "HTTP/1.1 200 ..."
        guard headEnd - start >= 12 else { return (Response(status: 0, body: []), headEnd + 4 - start) }
        var status = 0
        for index in start + 9..<start + 12 {
            status = status * 10 + Int(bytes[index] &- 48)
        }
        var contentLength = 0
        var lineStart = start
        while lineStart < headEnd {
            var lineEnd = lineStart
            while lineEnd < headEnd && bytes[lineEnd] != 13 { lineEnd += 1 }
            let name = Array("content-length:".utf8)
            if lineEnd - lineStart > name.count {
                var matches = true
                for (offset, expected) in name.enumerated() where bytes[lineStart + offset] | 0x20 != expected {
                    matches = false
                    break
                }
                if matches {
                    contentLength = 0
                    for byte in bytes[(lineStart + name.count)..<lineEnd] where byte >= 48 && byte <= 57 {
                        contentLength = contentLength * 10 + Int(byte - 48)
                    }
                }
            }
            lineStart = lineEnd + 2
        }
        let bodyStart = headEnd + 4
        guard bytes.endIndex - bodyStart >= contentLength else { return nil }
        let body = bytes[bodyStart..<bodyStart + contentLength]
        return (Response(status: status, body: body), bodyStart + contentLength - start)
    }

    private static func find(_ needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var index = haystack.startIndex
        let last = haystack.endIndex - needle.count
        while index <= last {
            if haystack[index] == needle[0] && haystack[index + 1] == needle[1] && haystack[index + 2] == needle[2]
                && haystack[index + 3] == needle[3]
            {
                return index
            }
            index += 1
        }
        return nil
    }

    /// `127.0.0.1:8787` as a socket address (IPv4 literals only: the benchmark stays on loopback).
    static func address(_ text: String) -> sockaddr_in? {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, String(text[..<colon]), &address.sin_addr) == 1 else { return nil }
        return address
    }
}
