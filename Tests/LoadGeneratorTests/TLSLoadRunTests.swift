import Foundation
import HTTP1
import HTTPServer
import Synchronization
import TLS
import Testing

@testable import LoadGenerator

/// The measurements over HTTPS (`--ca-file`), against the relay's own HTTP server serving TLS on loopback: keep-alive
/// TLS connections that verify the server's certificate, and refused when it does not verify.
@Suite("The load generator's measurements over HTTPS, on loopback", .serialized)
struct TLSLoadRunTests {
    /// Answers every request 200 `{}` (a POST once its body is read), counting requests and connections' peers.
    final class Answering: HTTPHandler {
        let requests = Mutex(0)

        func head(_ head: HTTPRequestHead) -> HeadDecision {
            guard head.method == "POST" else {
                requests.withLock { $0 += 1 }
                return .respond(.json(200, "{}"))
            }
            return .readBody(limit: 8192)
        }

        func request(_ head: HTTPRequestHead, body: [UInt8], responder: HTTPResponder) {
            requests.withLock { $0 += 1 }
            responder.respond(.json(200, "{}"))
        }

        func bodyTooLarge(_ head: HTTPRequestHead) -> HTTP1Response { .json(413, "{}") }
    }

    struct Fixture {
        let server: HTTPServer
        let handler = Answering()
        let caFile: String
        let target: LoadTarget

        init(timeoutSeconds: Int = 30) throws {
            let pki = try LocalPKI.generate()
            caFile = NSTemporaryDirectory() + "duo-relay-load-tls-\(UUID().uuidString).pem"
            try pki.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
            var configuration = HTTPServerConfiguration(
                host: "127.0.0.1", port: 0, perAddressConnectionLimit: 0, connectionTimeoutSeconds: timeoutSeconds)
            configuration.tls = try TLSServerContext(
                httpFrontChainPEM: pki.certificatePEM, privateKeyPEM: pki.privateKeyPEM,
                now: Int64(Date().timeIntervalSince1970))
            server = try HTTPServer(configuration: configuration, handler: handler)
            target = try #require(LoadTarget("127.0.0.1:\(server.port)"))
        }

        func tls(caFile: String? = nil, serverName: String? = nil) throws -> LoadTLS {
            var options = ["--ca-file", caFile ?? self.caFile]
            if let serverName { options += ["--server-name", serverName] }
            return try #require(try LoadTLS.from(Arguments(options), target: target.text))
        }

        func stop() {
            server.stop()
            try? FileManager.default.removeItem(atPath: caFile)
        }
    }

    private func requests(_ target: LoadTarget) -> [[UInt8]] {
        (0..<4).map { HTTPRequestBytes.post(path: "/v1/push", host: target.text, body: Array("{\"n\":\($0)}".utf8)) }
    }

    @Test("closed loop over HTTPS: keep-alive TLS connections, every answer counted")
    func closedLoop() throws {
        let fixture = try Fixture()
        defer { fixture.stop() }
        let loop = ClosedLoop(
            address: fixture.target.address, requests: requests(fixture.target), connections: 4, seconds: 0.3,
            warmupSeconds: 0.1, tls: try fixture.tls())
        let report = try loop.run(watching: WatchedProcesses(Arguments([])))
        #expect(report.answers > 10)
        #expect(report.statuses == [200: report.answers])
        #expect(report.failures == 0)
        // The warm-up's answers and those after the window are not counted.
        #expect(fixture.handler.requests.withLock { $0 } > report.answers)
    }

    @Test("open loop over HTTPS: every scheduled request sent and answered")
    func openLoop() throws {
        let fixture = try Fixture()
        defer { fixture.stop() }
        let loop = OpenLoop(
            address: fixture.target.address, requests: requests(fixture.target), rate: 200, seconds: 0.2,
            warmupSeconds: 0.05, connections: 2, tls: try fixture.tls(serverName: "127.0.0.1"))
        let report = try loop.run()
        #expect(report.scheduled == 50)
        #expect(report.statuses == [200: 50])
        #expect(report.failures == 0 && report.unanswered == 0)
        #expect(fixture.handler.requests.withLock { $0 } == 50)
    }

    @Test("idle over HTTPS: every connection handshaken, answered once, then held")
    func idle() throws {
        let fixture = try Fixture()
        defer { fixture.stop() }
        let idle = IdleConnections(
            address: fixture.target.address, host: fixture.target.text, count: 40, relayPID: getpid(),
            settleSeconds: 0.2, tls: try fixture.tls())
        let report = try idle.run()
        #expect(report.answered == 40)
        #expect(report.failures == 0)
        #expect(report.stillOpen == 40)
        #expect(fixture.handler.requests.withLock { $0 } == 40)
    }

    @Test("idle over HTTPS: connections the server closes (its close_notify) are not still open")
    func idleClosedByTheServer() throws {
        let fixture = try Fixture(timeoutSeconds: 1)
        defer { fixture.stop() }
        let idle = IdleConnections(
            address: fixture.target.address, host: fixture.target.text, count: 10, relayPID: getpid(),
            settleSeconds: 2, tls: try fixture.tls())
        let report = try idle.run()
        #expect(report.answered == 10)
        #expect(report.failures == 0)
        #expect(report.stillOpen == 0)
    }

    @Test("a certificate that does not verify (another CA, another name) ends the run: no request is sent")
    func unverifiedCertificate() throws {
        let fixture = try Fixture()
        defer { fixture.stop() }
        let other = try LocalPKI.generate()
        let otherFile = NSTemporaryDirectory() + "duo-relay-load-tls-other-\(UUID().uuidString).pem"
        try other.caCertificatePEM.write(toFile: otherFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: otherFile) }
        for tls in [try fixture.tls(caFile: otherFile), try fixture.tls(serverName: "relay.example")] {
            let loop = ClosedLoop(
                address: fixture.target.address, requests: requests(fixture.target), connections: 2, seconds: 0.2,
                warmupSeconds: 0, tls: tls)
            #expect(throws: LoadError(.failed, "")) { try loop.run(watching: WatchedProcesses(Arguments([]))) }
        }
        #expect(fixture.handler.requests.withLock { $0 } == 0)
    }

    @Test("--ca-file makes HTTPS (a file that cannot be read is refused); without it, plain HTTP")
    func options() throws {
        #expect(try LoadTLS.from(Arguments([]), target: "127.0.0.1:8787") == nil)
        let fixture = try Fixture()
        defer { fixture.stop() }
        let tls = try fixture.tls()
        #expect(tls.host == "127.0.0.1" && tls.port == fixture.server.port)
        #expect(tls.stream.serverName == "localhost")
        #expect(throws: LoadError(.usage, "")) {
            try LoadTLS.from(Arguments(["--ca-file", "/nonexistent/ca.pem"]), target: "127.0.0.1:8787")
        }
    }
}
