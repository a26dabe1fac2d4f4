import Glibc

/// The few direct socket operations the server needs besides libmicrohttpd.
enum RawSocket {
    /// Writes a last message on a connection that is about to be closed, as far as the socket takes it without
    /// blocking, then ends the sending side and discards what the client already sent. Unread input at close makes
    /// the kernel reset the connection, which can destroy the message before the client reads it.
    static func sendFinal(_ bytes: [UInt8], on socket: Int32) {
        var off: Int32 = 0
        var on: Int32 = 1
        _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_CORK, &off, socklen_t(MemoryLayout<Int32>.size))
        _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if sent <= 0 { break }
            offset += sent
        }
        _ = shutdown(socket, Int32(SHUT_WR))
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        for _ in 0..<8 {
            let count = scratch.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count <= 0 { break }
        }
    }
}
