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
        let server = try Listener()
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
        #expect(Self.openSocketInodes().isSuperset(of: [toClient, toServer]))

        client = nil
        close(accepted)
        // The forwarder lives on (its deinit ends every connection): the connection's end alone must close them.
        withExtendedLifetime(forwarder) {
            let deadline = Date().addingTimeInterval(10)
            while !Self.openSocketInodes().isDisjoint(with: [toClient, toServer]) && Date() < deadline {
                usleep(10_000)
            }
            #expect(
                Self.openSocketInodes().isDisjoint(with: [toClient, toServer]),
                "the forwarder still holds the sockets of a connection whose ends have both closed")
        }
    }

    /// The inode of the established IPv4 TCP socket whose ports match, from /proc/net/tcp.
    static func socketInode(matching ports: (_ local: UInt16, _ remote: UInt16) -> Bool) -> String? {
        // Read to the end: procfs files report size 0.
        guard let data = FileHandle(forReadingAtPath: "/proc/net/tcp")?.readDataToEndOfFile() else { return nil }
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 9, fields[3] == "01" else { continue }
            func port(_ field: Substring) -> UInt16? {
                field.split(separator: ":").last.flatMap { UInt16($0, radix: 16) }
            }
            if let local = port(fields[1]), let remote = port(fields[2]), ports(local, remote) {
                return String(fields[9])
            }
        }
        return nil
    }

    /// The inodes of the sockets this process has open.
    static func openSocketInodes() -> Set<String> {
        let directory = "/proc/self/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return Set(
            entries.compactMap { entry in
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + entry),
                    target.hasPrefix("socket:[")
                else { return nil }
                return String(target.dropFirst("socket:[".count).dropLast())
            })
    }
}
