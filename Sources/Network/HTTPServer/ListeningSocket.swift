import Glibc

/// Opens the server's one listening socket, so that a failure can say what went wrong. Every worker listens on a
/// duplicate of it: a port already in use, by this user's other servers too, fails here (`SO_REUSEPORT` sockets
/// would have joined them silently).
enum ListeningSocket {
    struct Opened {
        let descriptor: Int32
        let port: UInt16
        let isIPv6: Bool
    }

    static func open(host: String, port: UInt16, backlog: Int32) throws(HTTPServerError) -> Opened {
        var literal = host
        if literal.hasPrefix("[") && literal.hasSuffix("]") {
            literal = String(literal.dropFirst().dropLast())
        }
        var storage = sockaddr_storage()
        let length: socklen_t
        let family: Int32
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, literal, &v4) == 1 {
            family = AF_INET
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutableBytes(of: &storage) { raw in
                let address = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                address.pointee.sin_family = sa_family_t(AF_INET)
                address.pointee.sin_port = port.bigEndian
                address.pointee.sin_addr = v4
            }
        } else if inet_pton(AF_INET6, literal, &v6) == 1 {
            family = AF_INET6
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeMutableBytes(of: &storage) { raw in
                let address = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                address.pointee.sin6_family = sa_family_t(AF_INET6)
                address.pointee.sin6_port = port.bigEndian
                address.pointee.sin6_addr = v6
            }
        } else {
            throw HTTPServerError(.invalidConfiguration, "host \"\(host)\" is not an IPv4 or IPv6 address")
        }

        let endpoint = family == AF_INET6 ? "[\(literal)]:\(port)" : "\(literal):\(port)"
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else {
            throw HTTPServerError(.bindFailed, "cannot open a socket for \(endpoint): \(errorText())")
        }
        var one: Int32 = 1
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        if family == AF_INET6 {
            // "::" accepts IPv4 too (peers then appear as IPv4); any other IPv6 address is IPv6 only.
            var only: Int32 = v6 == in6addr_any ? 0 : 1
            _ = setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &only, socklen_t(MemoryLayout<Int32>.size))
        }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        guard bound == 0 else {
            let text = errorText()
            close(descriptor)
            throw HTTPServerError(.bindFailed, "cannot bind \(endpoint): \(text)")
        }
        guard listen(descriptor, backlog) == 0 else {
            let text = errorText()
            close(descriptor)
            throw HTTPServerError(.bindFailed, "cannot listen on \(endpoint): \(text)")
        }
        // Every worker accepts from this socket, so it must not block.
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)

        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &actualLength) }
        }
        let boundPort = withUnsafeBytes(of: &actual) { raw -> UInt16 in
            family == AF_INET
                ? UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port)
                : UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port)
        }
        return Opened(descriptor: descriptor, port: boundPort, isIPv6: family == AF_INET6)
    }

    private static func errorText() -> String {
        String(cString: strerror(errno))
    }
}

extension in6_addr {
    fileprivate static func == (lhs: in6_addr, rhs: in6_addr) -> Bool {
        withUnsafeBytes(of: lhs) { left in withUnsafeBytes(of: rhs) { right in left.elementsEqual(right) } }
    }
}

extension ListeningSocket {
    /// Takes a listening socket this process was given (socket activation): it must be a listening TCP stream
    /// socket. It is made non-blocking and close-on-exec; it stays open here, however this ends.
    static func adopt(_ descriptor: Int32) throws(HTTPServerError) -> Opened {
        func option(_ name: Int32) -> Int32? {
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            return getsockopt(descriptor, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
        }
        guard let type = option(SO_TYPE) else {
            throw HTTPServerError(.bindFailed, "descriptor \(descriptor) is not a socket")
        }
        guard type == Int32(SOCK_STREAM.rawValue), let domain = option(SO_DOMAIN),
            domain == AF_INET || domain == AF_INET6
        else {
            throw HTTPServerError(.bindFailed, "the socket passed is not a TCP stream socket (IPv4 or IPv6)")
        }
        guard option(SO_ACCEPTCONN) == 1 else {
            throw HTTPServerError(.bindFailed, "the socket passed is not listening")
        }
        _ = fcntl(descriptor, F_SETFD, fcntl(descriptor, F_GETFD) | FD_CLOEXEC)
        // Every worker accepts from this socket, so it must not block.
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        var bound = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        let port = withUnsafeBytes(of: &bound) { raw -> UInt16 in
            domain == AF_INET
                ? UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port)
                : UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port)
        }
        return Opened(descriptor: descriptor, port: port, isIPv6: domain == AF_INET6)
    }
}
