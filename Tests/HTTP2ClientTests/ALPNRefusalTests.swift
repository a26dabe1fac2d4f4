import Foundation
import HTTP2Client
import RelayTestSupport
import Synchronization
import Testing

/// A TLS server that does not take part in ALPN (`openssl s_server`, which serves HTTP/1 only):
/// the handshake completes, no protocol is agreed, and the client must not speak HTTP/2 to it.
@Suite("HTTP2Client against a TLS server that does not agree to h2")
struct ALPNRefusalTests {
    @Test func theRequestFailsWithTLSNotProcessedAndTheEventSaysALPN() async throws {
        let pki = TestPKI.shared
        let port = try freePort()
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        server.arguments = [
            "s_server", "-quiet", "-www", "-accept", "127.0.0.1:\(port)", "-cert", pki.serverCertificate, "-key",
            pki.serverKey,
        ]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer {
            // s_server does not end on SIGTERM here (the other test servers are stopped the same way).
            kill(server.processIdentifier, SIGKILL)
            server.waitUntilExit()
        }
        try #require(await waitUntilListening(port: port, process: server), "openssl s_server did not start")

        let events = Mutex<[HTTP2ClientEvent]>([])
        let client = try HTTP2Client(
            configuration: HTTP2ClientConfiguration(
                origin: "https://127.0.0.1:\(port)", caFile: pki.caFile, maxConnections: 1,
                onEvent: { event in events.withLock { $0.append(event) } }))
        defer { client.shutdown() }
        let error = try #require(await client.send(HTTP2Request(path: "/x", body: [1])).failure)
        #expect(error.code == .tls, "\(error)")
        #expect(!error.mayHaveBeenProcessed)
        let kinds = events.withLock { $0.map(\.kind) }
        #expect(kinds.contains(.alpnRefused), "\(kinds)")
        #expect(!kinds.contains(.connected), "\(kinds)")
    }
}
