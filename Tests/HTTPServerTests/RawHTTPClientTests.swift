import Glibc
import RelayTestSupport
import Testing

/// The test client's own upkeep.
@Suite struct RawHTTPClientTests {
    /// A client whose connect fails closes its socket once. Closed again (by deinit, since a throwing init runs it
    /// once every stored property is set), the number may by then be another file's: a server's eventfd, whose
    /// loss aborts the test process when that server stops.
    @Test func aClientThatCannotConnectClosesItsSocketOnce() {
        errno = 0
        do {
            // Nothing listens on port 1 of the loopback (the relay's client tests count on it too).
            _ = try RawHTTPClient(port: 1)
            Issue.record("connected to port 1")
        } catch {}
        // A second close of the number fails with EBADF (when no other file took it in between): the last
        // error on this thread.
        let lastError = errno
        #expect(lastError != EBADF, "the socket of a client that could not connect was closed twice")
    }
}
