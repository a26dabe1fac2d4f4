import Foundation
import Glibc
import RelayTestSupport
import Testing

@testable import RedisClient

@Suite struct RedisTransportTests {
    /// `close()` then `deinit` (the pipeline closes a transport it drops) closes the socket once: the
    /// descriptor's number, free after the first close, may already be another file's.
    @Test func aTransportClosedTwiceClosesItsSocketOnce() throws {
        let listener = try LoopbackListener(backlog: 4)
        defer { close(listener.descriptor) }
        let port = listener.port

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
