import Foundation
import RelayTestSupport
import Synchronization
import TCPForwarder
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `duo-relay push` through the binary: behind the documented nginx front with a private CA, and every place a
/// push without an answer can fail, each saying whether the relay may have it.
@Suite struct PushCommandTests {
    static let nginx = "/usr/sbin/nginx"

    @Test(
        "push --ca-file delivers through a TLS front with a private CA; without it, the certificate is not trusted",
        .enabled(if: Tool.isAvailable(nginx), "nginx is not installed (scripts/install-deps --test)"))
    func throughATLSFrontWithAPrivateCA() async throws {
        let fixture = try RelayClientEndToEndTests.makeFixture()
        let front = try NginxFront(upstreamPort: fixture.relay.port)
        defer { front.stop() }
        let pki = TestPKI.shared
        let grant = try fixture.grant(token: randomToken())
        let url = "https://localhost:\(front.port)"

        let delivered = try CommandRun(["push", "--relay", url, "--grant", grant, "--ca-file", pki.caFile])
        #expect(delivered.status == 0, "\(delivered.output)")
        #expect(delivered.standardOutput.hasPrefix("push: delivered, apns-id "), "\(delivered.output)")
        #expect(delivered.standardOutput.contains(" (HTTP 200, "), "\(delivered.output)")
        #expect(fixture.waitForDeliveries(1).count == 1)
        #expect(!delivered.output.contains(grant))

        // The system's roots alone: refused in the handshake, before the request left.
        let untrusted = try CommandRun(["push", "--relay", url, "--grant", grant])
        #expect(untrusted.status == 1)
        #expect(
            untrusted.standardOutput.hasPrefix(
                "push: refused by TLS: the certificate of localhost:\(front.port) is not trusted: "),
            "\(untrusted.output)")
        #expect(untrusted.standardOutput.contains("give its CA with --ca-file"), "\(untrusted.output)")
        #expect(
            untrusted.standardOutput.contains("; the push never reached the relay (no HTTP answer, "),
            "\(untrusted.output)")
        // A CA that signed something else is no better.
        let other = try CommandRun(["push", "--relay", url, "--grant", grant, "--ca-file", pki.otherCAFile])
        #expect(other.status == 1)
        #expect(other.standardOutput.contains("is not trusted: "), "\(other.output)")
        #expect(
            other.standardOutput.contains("(nor by --ca-file); the push never reached the relay"), "\(other.output)")
        // Neither reached the relay: nginx ended both connections in the handshake (its log says so once each), so
        // the simulator still has the one push.
        #expect(front.waitForHandshakeFailures(2), "\(front.errorLog)")
        #expect(fixture.simulator.delivered.count == 1)

        // The certificate names localhost and 127.0.0.1, not another name of this host.
        let elsewhere = try CommandRun([
            "push", "--relay", "https://127.0.0.1:\(front.port)", "--grant", grant, "--ca-file", pki.caFile,
        ])
        #expect(elsewhere.status == 0, "\(elsewhere.output)")

        let missing = try CommandRun(["push", "--relay", url, "--grant", grant, "--ca-file", "/nonexistent/ca.pem"])
        #expect(missing.status == 1)
        #expect(missing.standardError.contains("cannot read the CA file /nonexistent/ca.pem"), "\(missing.output)")
        let plain = try CommandRun([
            "push", "--relay", "http://127.0.0.1:\(fixture.relay.port)", "--grant", grant, "--ca-file", pki.caFile,
        ])
        #expect(plain.status == 64)
        #expect(plain.standardError.contains("--ca-file is for an https:// relay"), "\(plain.output)")
    }

    @Test("a push without an answer says where it failed and whether the relay may have it")
    func failuresSayWhereTheyHappened() throws {
        let grant = "AQEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        let nowhere = try CommandRun(["push", "--relay", "http://127.0.0.1:1", "--grant", grant])
        #expect(nowhere.status == 1)
        #expect(nowhere.standardOutput.hasPrefix("push: no connection to 127.0.0.1:1: "), "\(nowhere.output)")
        #expect(
            nowhere.standardOutput.contains("; the push never reached the relay (no HTTP answer, "),
            "\(nowhere.output)")

        // Connections complete in the kernel, then nothing: the TLS handshake never ends.
        let silent = try SilentListener()
        let handshake = try CommandRun([
            "push", "--relay", "https://127.0.0.1:\(silent.port)", "--grant", grant, "--timeout", "1",
        ])
        #expect(handshake.status == 1)
        #expect(
            handshake.standardOutput.hasPrefix(
                "push: timed out before a connection to 127.0.0.1:\(silent.port) was made; the push never reached the relay"
            ), "\(handshake.output)")
        // Over plain HTTP the request is written into the connection: the relay may have it.
        let unanswered = try CommandRun([
            "push", "--relay", "http://127.0.0.1:\(silent.port)", "--grant", grant, "--timeout", "1",
        ])
        #expect(unanswered.status == 1)
        #expect(
            unanswered.standardOutput.hasPrefix(
                "push: timed out waiting for the answer of 127.0.0.1:\(silent.port); the relay may have the push, "
                    + "so it may or may not have been delivered"), "\(unanswered.output)")

        // A server that speaks no TLS: refused by TLS, never reached.
        let plainServer = try CannedServer(answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        let noTLS = try CommandRun(["push", "--relay", "https://127.0.0.1:\(plainServer.port)", "--grant", grant])
        plainServer.join()
        #expect(noTLS.standardOutput.hasPrefix("push: refused by TLS: no TLS session with "), "\(noTLS.output)")
        #expect(noTLS.standardOutput.contains("; the push never reached the relay"), "\(noTLS.output)")

        // The request read, then the connection closed without an answer.
        let closing = try CannedServer(answer: "")
        let closed = try CommandRun(["push", "--relay", "http://127.0.0.1:\(closing.port)", "--grant", grant])
        closing.join()
        #expect(closing.requestLine == "POST /v1/push HTTP/1.1")
        #expect(
            closed.standardOutput.hasPrefix("push: the connection to 127.0.0.1:\(closing.port) ended before an answer"),
            "\(closed.output)")
        #expect(closed.standardOutput.contains("may or may not have been delivered"), "\(closed.output)")

        // An answer that leaves the outcome open (502, chunked), below a base path.
        let apns = try CannedServer(
            answer: "HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "9\r\n{\"error\":\r\n7\r\n\"apns\"}\r\n0\r\n\r\n")
        let open = try CommandRun(["push", "--relay", "http://127.0.0.1:\(apns.port)/relay/", "--grant", grant])
        apns.join()
        #expect(apns.requestLine == "POST /relay/v1/push HTTP/1.1")
        #expect(open.status == 1)
        #expect(
            open.standardOutput.hasPrefix(
                "push: no definite answer: the push may or may not have been delivered (HTTP 502, "),
            "\(open.output)")

        // A relay's 429 read from an answer framed by the connection's end.
        let limited = try CannedServer(
            answer: "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nConnection: close\r\n\r\n"
                + #"{"error":"rate_limited","limit":"phone"}"#)
        let later = try CommandRun(["push", "--relay", "http://127.0.0.1:\(limited.port)", "--grant", grant])
        limited.join()
        #expect(later.standardOutput.hasPrefix("push: refused for now (limit: phone); "), "\(later.output)")
        #expect(later.standardOutput.contains("retry after 7 s (HTTP 429, "), "\(later.output)")
    }
}

/// The documented nginx site (deploy/proxy/nginx.conf) as a TLS front on a loopback port, with the test PKI's
/// certificate (a private CA) and the relay at `upstreamPort` as its upstream. Stopped by PID.
final class NginxFront: Sendable {
    let port: UInt16
    private let process: Process
    private let directory: String

    init(upstreamPort: UInt16) throws {
        let pki = TestPKI.shared
        let directory = NSTemporaryDirectory() + "duo-relay-nginx-\(UUID().uuidString)"
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        port = try freePort()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let site = try String(contentsOf: root.appendingPathComponent("deploy/proxy/nginx.conf"), encoding: .utf8)
            .replacingOccurrences(of: "listen 443 ssl;", with: "listen 127.0.0.1:\(port) ssl;")
            .replacingOccurrences(of: "listen [::]:443 ssl;", with: "")
            .replacingOccurrences(of: "server 127.0.0.1:8787;", with: "server 127.0.0.1:\(upstreamPort);")
            .replacingOccurrences(of: "/etc/ssl/duo-relay/fullchain.pem", with: pki.serverCertificate)
            .replacingOccurrences(of: "/etc/ssl/duo-relay/privkey.pem", with: pki.serverKey)
        try site.write(toFile: directory + "/site.conf", atomically: true, encoding: .utf8)
        let temporary = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
            .map { "\($0)_temp_path \(directory)/\($0);" }.joined(separator: " ")
        // Its error log at `info` names every connection that ended in the TLS handshake.
        let main =
            "pid \(directory)/nginx.pid; error_log \(directory)/error.log info; daemon off; events {}\n"
            + "http { \(temporary) include \(directory)/site.conf; }\n"
        try main.write(toFile: directory + "/nginx.conf", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: PushCommandTests.nginx)
        process.arguments = ["-p", directory, "-c", directory + "/nginx.conf", "-e", "stderr"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        self.process = process
        try process.run()
        guard waitUntilListening(port: port, process: process) else {
            stop()
            throw TestFailure("nginx did not start on port \(port)")
        }
    }

    /// What nginx logged (at `info`): its start, and each connection that failed.
    var errorLog: String {
        (try? String(contentsOfFile: directory + "/error.log", encoding: .utf8)) ?? ""
    }

    /// Waits until nginx has logged `count` connections that ended in the TLS handshake (a client that refused its
    /// certificate); nginx logs such a connection once, after it closed it.
    func waitForHandshakeFailures(_ count: Int) -> Bool {
        waitForLine(containing: "while SSL handshaking", count: count) {
            errorLog.split(separator: "\n").map(String.init)
        }
    }

    func stop() {
        // nginx sets its own signal mask, so SIGTERM reaches it (a child may inherit a mask that blocks it); bounded
        // all the same.
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            if !Poll.until(within: .seconds(10), every: .milliseconds(20), { !process.isRunning }) {
                kill(process.processIdentifier, SIGKILL)
            }
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A loopback server for one connection: reads one request (head and `Content-Length` body), writes `answer`
/// as given (nothing: it only closes) and closes.
final class CannedServer: Sendable {
    let port: UInt16
    private let thread: JoinableThread
    private let firstLine = Seen()

    /// The request line it read.
    var requestLine: String? { firstLine.line.withLock { $0 } }

    private final class Seen: Sendable {
        let line = Mutex<String?>(nil)
    }

    init(answer: String) throws {
        let listener = try LoopbackListener(backlog: 1)
        port = listener.port
        let firstLine = self.firstLine
        thread = try JoinableThread {
            defer { close(listener.descriptor) }
            var pollSet = pollfd(fd: listener.descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&pollSet, 1, 10_000) == 1 else { return }
            let connection = accept(listener.descriptor, nil, nil)
            guard connection >= 0 else { return }
            defer { close(connection) }
            var received: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            // Bounded: at most 64 reads, each waiting at most 5 s.
            for _ in 0..<64 {
                var readable = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
                guard poll(&readable, 1, 5_000) == 1 else { break }
                let count = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { break }
                received += chunk[0..<count]
                if Self.isComplete(received) { break }
            }
            let text = String(decoding: received, as: UTF8.self)
            firstLine.line.withLock { $0 = text.components(separatedBy: "\r\n").first }
            let bytes = Array(answer.utf8)
            _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
    }

    func join() { thread.join() }

    private static func isComplete(_ bytes: [UInt8]) -> Bool {
        // A TLS record (a ClientHello): answered at once, as a server that speaks no TLS would.
        if bytes.first == 0x16 { return true }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let headEnd = text.range(of: "\r\n\r\n") else { return false }
        let length =
            text[..<headEnd.lowerBound].components(separatedBy: "\r\n")
            .first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        return text.utf8.distance(from: headEnd.upperBound, to: text.endIndex) >= length
    }
}

extension PushCommandTests {
    /// A 502 `apns` says which of three it was, and `push` tells the operator: APNs refused it (with its reason) or
    /// was never reached, not delivered; sent without an answer, it may or may not have been.
    @Test func a502SaysWhetherThePushWasDelivered() throws {
        let fixture = try PushFixture(apnsConfig: #""timeout_ms":800"#)
        let relay = "http://127.0.0.1:\(fixture.relay.port)"
        let grant = try fixture.grant(token: randomToken())
        fixture.simulator.inject(.status(400, reason: "BadTopic"))
        let refused = try CommandRun(["push", "--relay", relay, "--grant", grant])
        #expect(refused.status == 1)
        #expect(
            refused.standardOutput.hasPrefix("push: not delivered: APNs refused the push (BadTopic) (HTTP 502, "),
            "\(refused.output)")
        fixture.simulator.inject(.stall)
        let unknown = try CommandRun(["push", "--relay", relay, "--grant", grant])
        #expect(unknown.status == 1)
        #expect(
            unknown.standardOutput.hasPrefix(
                "push: no definite answer: sent to APNs, but no answer came: the push may or may not have been "
                    + "delivered (HTTP 502, "), "\(unknown.output)")
        #expect(!refused.output.contains(grant) && !unknown.output.contains(grant))

        // A relay whose APNs cannot be reached at all.
        let secrets = TestSecrets()
        let alone = try RelayProcess(
            config: RelayProcess.config(apns: #""sandbox_origin":"https://127.0.0.1:1","timeout_ms":800"#),
            secrets: secrets)
        let connection = try alone.connect()
        let aloneGrant = try #require(
            try connection.request(
                "POST", "/v1/grant", body: Array(#"{"token":"\#(randomToken())","environment":"sandbox"}"#.utf8)
            ).json?["grant"] as? String)
        let unreached = try CommandRun(["push", "--relay", "http://127.0.0.1:\(alone.port)", "--grant", aloneGrant])
        #expect(unreached.status == 1)
        #expect(
            unreached.standardOutput.hasPrefix("push: not delivered: APNs was not reached (HTTP 502, "),
            "\(unreached.output)")
    }
}
