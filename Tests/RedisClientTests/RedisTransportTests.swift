import Foundation
import Glibc
import Testing

@testable import RedisClient

@Suite struct RedisTransportTests {
    /// `close()` then `deinit` (the pipeline closes a transport it drops) closes the socket once: the
    /// descriptor's number, free after the first close, may already be another file's.
    @Test func aTransportClosedTwiceClosesItsSocketOnce() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 4) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        try #require(bound)
        let port = UInt16(bigEndian: address.sin_port)

        var transport: RedisTransport? = try RedisTransport.connect(
            host: "127.0.0.1", port: port, tls: nil, deadline: Monotonic.now + 2_000_000_000
        ).get()
        transport?.close()
        // The lowest free number: the one the transport's socket had, unless another test took it first.
        let other = open("/dev/null", O_RDONLY)
        try #require(other >= 0)
        defer { close(other) }
        transport = nil
        #expect(fcntl(other, F_GETFD) != -1, "a file opened after close() was closed by deinit")
    }
}
