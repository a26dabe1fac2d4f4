import Foundation
import RelayTestSupport
import TLS
import Testing

@testable import HTTPServer

/// The server's TLS shell over loopback, one test per behaviour, with Python's `ssl` (OpenSSL underneath, verifying
/// the chain and the host name) as the client: what a real client sees of the handshake phase and the records.
@Suite("HTTPServer with TLS over loopback")
struct TLSServerTests {
    static let python = "/usr/bin/python3"

    struct Fixture {
        let pki: LocalPKI
        let caFile: String
        let server: HTTPServer

        init(timeoutSeconds: Int = 30) throws {
            pki = try LocalPKI.generate()
            caFile = NSTemporaryDirectory() + "duo-relay-tls-server-test-\(UUID().uuidString).pem"
            try pki.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
            var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
            configuration.connectionTimeoutSeconds = timeoutSeconds
            configuration.tls = try TLSServerContext(
                httpFrontChainPEM: pki.certificatePEM, privateKeyPEM: pki.privateKeyPEM,
                now: Int64(Date().timeIntervalSince1970))
            server = try HTTPServer(configuration: configuration, handler: TestHandler())
        }

        func failures(_ kind: String) -> Int {
            server.tlsHandshakeFailures.first { $0.kind == kind }?.count ?? -1
        }
    }

    /// Runs `script` with the port and the CA file as `sys.argv[1]` and `[2]`; its standard output, trimmed.
    static func python(_ script: String, _ fixture: Fixture, timeout: Duration = .seconds(30)) throws -> String {
        let result = try Tool.run(
            python, ["-c", script, String(fixture.server.port), fixture.caFile], timeout: timeout)
        #expect(result.status == 0, "\(result.errors)")
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A verifying client (chain and host name `localhost`) offering ALPN `alpn` (None: no ALPN), sending each
    /// request on one connection and printing each answer's status line and body, then the agreed protocol.
    static let client = """
        import socket, ssl, sys
        port, cafile = int(sys.argv[1]), sys.argv[2]
        context = ssl.create_default_context(cafile=cafile)
        if ALPN is not None: context.set_alpn_protocols(ALPN)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                for request in REQUESTS:
                    tls.sendall(request)
                    answer = b""
                    while b"\\r\\n\\r\\n" not in answer or not answer.endswith(b"}") and not answer.endswith(b"hi"):
                        chunk = tls.recv(4096)
                        if not chunk: break
                        answer += chunk
                    print(answer.split(b"\\r\\n")[0].decode(), answer.split(b"\\r\\n\\r\\n", 1)[1].decode())
                print(tls.selected_alpn_protocol(), tls.version())
        """

    static func client(alpn: [String]?, requests: [String]) -> String {
        let alpnText = alpn.map { "[" + $0.map { "\"\($0)\"" }.joined(separator: ",") + "]" } ?? "None"
        let requestsText = "[" + requests.map { "b\"\($0)\"" }.joined(separator: ",") + "]"
        return "ALPN = \(alpnText)\nREQUESTS = \(requestsText)\n" + client
    }

    static let hello = #"GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n"#
    static let echo = #"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\nhi"#

    @Test func aVerifyingClientIsServedOverKeepAliveWithALPNHTTP11() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let output = try Self.python(
            Self.client(alpn: ["h2", "http/1.1"], requests: [Self.hello, Self.echo]), fixture)
        let lines = output.split(separator: "\n")
        #expect(lines.count == 3, "\(output)")
        #expect(lines.first == #"HTTP/1.1 200 OK {"hello":"world"}"#, "\(output)")
        #expect(lines.dropFirst().first == "HTTP/1.1 200 OK hi", "\(output)")
        #expect(lines.last?.hasPrefix("http/1.1 TLSv1.") == true, "\(output)")
        #expect(fixture.server.tlsHandshakeFailures.allSatisfy { $0.count == 0 })
    }

    @Test func aClientOfferingNoALPNIsServed() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let output = try Self.python(Self.client(alpn: nil, requests: [Self.hello]), fixture)
        #expect(output.hasPrefix(#"HTTP/1.1 200 OK {"hello":"world"}"#), "\(output)")
        #expect(output.hasSuffix("None TLSv1.3"), "\(output)")
    }

    @Test func tls12IsServedWithAnECDHEAEADCipher() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let script = """
            import socket, ssl, sys
            context = ssl.create_default_context(cafile=sys.argv[2])
            context.maximum_version = ssl.TLSVersion.TLSv1_2
            with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as raw:
                with context.wrap_socket(raw, server_hostname="localhost") as tls:
                    print(tls.version(), tls.cipher()[0])
            """
        let output = try Self.python(script, fixture)
        #expect(output.hasPrefix("TLSv1.2 ECDHE-ECDSA-"), "\(output)")
        #expect(output.contains("GCM") || output.contains("CHACHA20"), "\(output)")
    }

    /// Each refusal, and the kind it is counted as (never with an address: the counts are all there is).
    @Test func refusedHandshakesAreCountedByKind() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let script = """
            import socket, ssl, sys
            port, cafile = int(sys.argv[1]), sys.argv[2]
            def attempt(configure):
                context = ssl.create_default_context(cafile=cafile)
                configure(context)
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                        with context.wrap_socket(raw, server_hostname="localhost") as tls:
                            return "served"
                except ssl.SSLError as error:
                    return str(error)
                except OSError as error:
                    return "closed"
            print(attempt(lambda c: c.set_alpn_protocols(["h2"])))
            def old(c):
                c.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
                c.maximum_version = ssl.TLSVersion.TLSv1_1
                c.set_ciphers("ALL:@SECLEVEL=0")
            print(attempt(old))
            def weak(c):
                c.maximum_version = ssl.TLSVersion.TLSv1_2
                c.set_ciphers("AES128-SHA256")
            print(attempt(weak))
            """
        let output = try Self.python(script, fixture).split(separator: "\n")
        #expect(output.count == 3)
        #expect(output.first?.contains("alert no application protocol") == true, "\(output)")
        #expect(output.dropFirst().allSatisfy { $0 != "served" }, "\(output)")
        try Poll.wait(for: "the failures counted", within: .seconds(5)) {
            fixture.failures("alpn") == 1 && fixture.failures("protocol") == 2
        }
        #expect(fixture.failures("timeout") == 0 && fixture.failures("other") == 0)
    }

    @Test func plainHTTPOnTheTLSPortIsClosedWithoutAnAnswer() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let client = try RawHTTPClient(port: fixture.server.port)
        try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(client.isClosedByPeer(within: 5))
        try Poll.wait(for: "the failure counted", within: .seconds(5)) { fixture.failures("protocol") == 1 }
    }

    @Test func aClientStalledMidHandshakeIsCutOffAtTheDeadline() throws {
        let fixture = try Fixture(timeoutSeconds: 1)
        defer { fixture.server.stop() }
        let client = try RawHTTPClient(port: fixture.server.port)
        let start = ContinuousClock.now
        // The start of a ClientHello record, and no more.
        try client.send([0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00])
        #expect(client.isClosedByPeer(within: 5))
        let waited = ContinuousClock.now - start
        #expect(waited >= .milliseconds(900) && waited < .seconds(5), "\(waited)")
        try Poll.wait(for: "the timeout counted", within: .seconds(5)) { fixture.failures("timeout") == 1 }
    }

    /// A reload's new certificate goes to connections accepted after it; a connection open before goes on with the
    /// old one.
    @Test func aReplacedContextServesNewConnectionsWhileAnOpenOneGoesOn() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let renewed = try LocalPKI.generate()
        let bothCAs = fixture.caFile + ".both.pem"
        try (fixture.pki.caCertificatePEM + renewed.caCertificatePEM).write(
            toFile: bothCAs, atomically: true, encoding: .utf8)
        let old = fixture.server.tlsCertificate
        let script = """
            import socket, ssl, sys, hashlib, time
            port, cafile = int(sys.argv[1]), sys.argv[2]
            def fingerprint(tls):
                return hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest().upper()
            def request(tls):
                tls.sendall(b"GET /hello HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n")
                answer = b""
                while not answer.endswith(b"}"): answer += tls.recv(4096)
                return answer.split(b" ")[1].decode()
            context = ssl.create_default_context(cafile=cafile)
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                with context.wrap_socket(raw, server_hostname="localhost") as tls:
                    print(fingerprint(tls), request(tls), flush=True)
                    while sys.stdin.readline().strip() != "go": pass
                    print(request(tls), flush=True)
                    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw2:
                        with context.wrap_socket(raw2, server_hostname="localhost") as fresh:
                            print(fingerprint(fresh), request(fresh), flush=True)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = ["-c", script, String(fixture.server.port), bothCAs]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let reader = output.fileHandleForReading
        var firstLine = Data()
        while !firstLine.contains(UInt8(ascii: "\n")) {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            firstLine += chunk
        }
        let first = String(decoding: firstLine, as: UTF8.self)
        #expect(first.hasPrefix((old?.fingerprint ?? "-").replacingOccurrences(of: ":", with: "") + " 200"), "\(first)")
        fixture.server.replaceTLSContext(
            try TLSServerContext(
                httpFrontChainPEM: renewed.certificatePEM, privateKeyPEM: renewed.privateKeyPEM,
                now: Int64(Date().timeIntervalSince1970)))
        #expect(fixture.server.tlsCertificate != old)
        input.fileHandleForWriting.write(Data("go\n".utf8))
        process.waitUntilExit()
        let rest = String(decoding: reader.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
        #expect(process.terminationStatus == 0)
        #expect(rest.first == "200", "\(rest)")
        let newFingerprint = (fixture.server.tlsCertificate?.fingerprint ?? "-").replacingOccurrences(of: ":", with: "")
        #expect(rest.last == "\(newFingerprint) 200", "\(rest)")
    }

    /// A stopping server closes an idle TLS connection and one still handshaking at once, and the drain ends.
    @Test func quiesceClosesIdleAndHandshakingTLSConnections() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let handshaking = try RawHTTPClient(port: fixture.server.port)
        try handshaking.send([0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00])
        let script = """
            import socket, ssl, sys
            context = ssl.create_default_context(cafile=sys.argv[2])
            with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as raw:
                with context.wrap_socket(raw, server_hostname="localhost") as tls:
                    print("open", flush=True)
                    print("closed" if tls.recv(1) == b"" else "data", flush=True)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = ["-c", script, String(fixture.server.port), fixture.caFile]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        var text = ""
        while !text.contains("open") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        fixture.server.quiesce()
        #expect(fixture.server.waitUntilDrained(until: .now() + .seconds(5)))
        #expect(handshaking.isClosedByPeer(within: 5))
        text += String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // The idle connection ended with the relay's close_notify, which Python reads as the end of the stream.
        #expect(text.contains("open\nclosed"), "\(text)")
        #expect(fixture.server.tlsHandshakeFailures.allSatisfy { $0.count == 0 })
    }

    /// A client that connected before the server stopped, and handshakes after, is still served: its handshake has
    /// the drain's wait, and its request is answered and the connection closed (as a restart on a held socket needs:
    /// no client that had already connected fails).
    @Test func aHandshakeUnderWayWhenTheServerStopsIsFinishedAndItsRequestAnswered() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let script = """
            import socket, ssl, sys
            context = ssl.create_default_context(cafile=sys.argv[2])
            with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as raw:
                print("connected", flush=True)
                sys.stdin.readline()
                with context.wrap_socket(raw, server_hostname="localhost") as tls:
                    tls.sendall(b"GET /hello HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n")
                    answer = b""
                    while True:
                        chunk = tls.recv(4096)
                        if not chunk: break
                        answer += chunk
                    head = answer.split(b"\\r\\n\\r\\n")[0].decode().lower()
                    print(head.split("\\r\\n")[0], "close" if "connection: close" in head else "kept", flush=True)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = ["-c", script, String(fixture.server.port), fixture.caFile]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        var text = ""
        while !text.contains("connected") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        #expect(text.contains("connected"), "\(text)")
        // Accepted (counted against the caps) before the server stops, as the handshake has not begun.
        try Poll.wait(for: "the connection accepted", within: .seconds(5)) { fixture.server.core.caps.open == 1 }
        fixture.server.quiesce()
        input.fileHandleForWriting.write(Data("go\n".utf8))
        text += String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(text.contains("http/1.1 200 ok close"), "\(text)")
        #expect(fixture.server.waitUntilDrained(until: .now() + .seconds(5)))
        #expect(fixture.server.tlsHandshakeFailures.allSatisfy { $0.count == 0 })
    }

    /// A connection counts against the caps from its accept, before its handshake: one stalled mid-handshake holds
    /// its place, and gives it back as soon as it is cut off.
    @Test func aConnectionCountsAgainstTheCapsFromItsAcceptBeforeItsHandshake() throws {
        let fixture = try Fixture(timeoutSeconds: 1)
        defer { fixture.server.stop() }
        #expect(fixture.server.core.caps.open == 0)
        let stalled = try RawHTTPClient(port: fixture.server.port)
        try stalled.send([0x16, 0x03, 0x01])
        try Poll.wait(for: "the connection counted", within: .seconds(5)) { fixture.server.core.caps.open == 1 }
        #expect(stalled.isClosedByPeer(within: 5))
        try Poll.wait(for: "the connection released", within: .seconds(5)) { fixture.server.core.caps.open == 0 }
    }
}
