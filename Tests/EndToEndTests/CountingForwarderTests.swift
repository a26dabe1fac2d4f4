import Foundation
import RelayTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The test forwarder's own upkeep: it must not keep the descriptors of the connections it has forwarded.
@Suite struct CountingForwarderTests {
    /// Once both ends of a forwarded connection have closed, the forwarder's two sockets for it are closed: kept,
    /// they would stay open (two descriptors a connection) for the rest of the test process.
    @Test func aForwardedConnectionsSocketsAreClosedOnceBothEndsHaveClosed() throws {
        let server = try SilentListener()
        let forwarder = try CountingForwarder(to: server.port)
        var client: RawHTTPClient? = try RawHTTPClient(port: forwarder.port, timeoutSeconds: 5)
        let accepted = accept(server.descriptor, nil, nil)
        try #require(accepted >= 0)
        try client?.send(Array("ping".utf8))
        var byte: UInt8 = 0
        #expect(recv(accepted, &byte, 1, 0) == 1, "the bytes were not forwarded")
        #expect(forwarder.connections == 1)

        // The forwarder's sockets: the one it accepted (local port: the forwarder's) and the one it opened to
        // the server (remote port: the server's; the test has no other connection to it).
        let toClient = try #require(Self.socketInode { local, _ in local == forwarder.port })
        let toServer = try #require(Self.socketInode { _, remote in remote == server.port })
        #expect(LoopbackSocket.openInodes().isSuperset(of: [toClient, toServer]))

        client = nil
        close(accepted)
        // The forwarder lives on (its deinit ends every connection): the connection's end alone must close them.
        withExtendedLifetime(forwarder) {
            #expect(
                Poll.until(within: .seconds(10), every: .milliseconds(10)) {
                    LoopbackSocket.openInodes().isDisjoint(with: [toClient, toServer])
                },
                "the forwarder still holds the sockets of a connection whose ends have both closed")
        }
    }

    /// The inode of the established IPv4 TCP socket whose ports match.
    static func socketInode(matching ports: (_ local: UInt16, _ remote: UInt16) -> Bool) -> String? {
        LoopbackSocket.all(state: .established).first { ports($0.localPort, $0.remotePort) }?.inode
    }
}
