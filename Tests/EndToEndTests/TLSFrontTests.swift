import APNsSimulator
import Foundation
import RelayTestSupport
import Testing

/// `tls` in the real binary, with real clients (docs/DESIGN.md, "TLS"): curl and Python's `ssl` verify the chain and
/// the host name, `openssl s_client` tries what must be refused, and a renewal by SIGHUP under keep-alive pushes.
@Suite struct TLSFrontTests {
    static let python = "/usr/bin/python3"
    static let curl = "/usr/bin/curl"
    static let openssl = "/usr/bin/openssl"

    /// A certificate pair written where `tls` reads it (the key readable by its owner only), and a CA file a client
    /// trusts it by.
    struct PairFiles {
        let directory: String
        var certificate: String { directory + "/fullchain.pem" }
        var key: String { directory + "/privkey.pem" }
        var caFile: String { directory + "/ca.pem" }

        init(_ pki: SimulatorPKI, trusting extraCAs: [SimulatorPKI] = []) throws {
            directory = NSTemporaryDirectory() + "duo-relay-tls-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try write(pki)
            try (([pki] + extraCAs).map(\.caCertificatePEM).joined()).write(
                toFile: caFile, atomically: true, encoding: .utf8)
        }

        /// Writes `pki`'s pair over the files (as a renewal does), the key with `keyMode`.
        func write(_ pki: SimulatorPKI, keyOf other: SimulatorPKI? = nil, keyMode: mode_t = 0o600) throws {
            try pki.certificatePEM.write(toFile: certificate, atomically: true, encoding: .utf8)
            try (other ?? pki).privateKeyPEM.write(toFile: key, atomically: true, encoding: .utf8)
            chmod(key, keyMode)
        }

        var config: String {
            #""tls":{"certificate_file":"\#(certificate)","key_file":"\#(key)"}"#
        }
    }

    static let generous =
        #""ip_limit":{"requests":100000,"period_s":10,"block_s":10},"push_limit":{"requests":100000,"period_s":60}"#

    static func fixture(_ files: PairFiles, extra: String = "") throws -> PushFixture {
        try PushFixture(relayConfig: generous + "," + files.config + (extra.isEmpty ? "" : "," + extra))
    }

    /// The fingerprint in the relay's line that starts with `prefix` (the start-up summary or a reload), without
    /// colons, as Python's `hashlib` prints one.
    static func fingerprint(in text: String, after prefix: String) -> String? {
        guard let line = text.split(separator: "\n").last(where: { $0.contains(prefix) }),
            let range = line.range(of: "SHA-256 ")
        else { return nil }
        return String(line[range.upperBound...].prefix { $0 != " " && $0 != ";" }).replacingOccurrences(
            of: ":", with: "")
    }

    static func metrics(_ fixture: PushFixture) throws -> String { try fixture.relay.scrapeMetrics() }

    @Test func curlAndPythonVerifyingTheHostNameMintGrantsAndPush() throws {
        let files = try PairFiles(try SimulatorPKI.generate())
        let fixture = try Self.fixture(files)
        let port = fixture.relay.port
        let token = PushFixture.hex64().lowercased()
        let grantBody = #"{"token":"\#(token)","environment":"sandbox"}"#
        // curl: the chain against --cacert, the name localhost (resolved to the relay's address).
        let resolve = ["--resolve", "localhost:\(port):127.0.0.1", "--cacert", files.caFile]
        let grant = try Tool.run(
            Self.curl, ["-sS", "--fail-with-body"] + resolve + ["https://localhost:\(port)/v1/grant", "-d", grantBody])
        #expect(grant.status == 0, "\(grant.errors)")
        let grantText = try #require(
            grant.output.range(of: #""grant":""#).map { grant.output[$0.upperBound...].prefix { $0 != "\"" } })
        let body = String(decoding: PushFixture.pushBody(grant: String(grantText)), as: UTF8.self)
        let push = try Tool.run(
            Self.curl,
            ["-sS", "--fail-with-body", "-w", " %{http_version}"] + resolve + [
                "https://localhost:\(port)/v1/push", "-d", body,
            ])
        #expect(push.status == 0, "\(push.errors)")
        #expect(push.output.contains(#""apns_id":""#) && push.output.hasSuffix(" 1.1"), "\(push.output)")

        // Python's ssl: the default context verifies the chain and the host name.
        let script = """
            import http.client, json, ssl, sys
            port, cafile, token, sealed = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
            context = ssl.create_default_context(cafile=cafile)
            context.set_alpn_protocols(["http/1.1"])
            connection = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
            connection.request("POST", "/v1/grant", json.dumps({"token": token, "environment": "sandbox"}))
            grant = json.loads(connection.getresponse().read())["grant"]
            for n in range(3):
                connection.request("POST", "/v1/push", json.dumps(
                    {"grant": grant, "sealed": sealed, "id": "%064X" % n, "thread": "%064X" % n}))
                answer = connection.getresponse()
                print(answer.status, json.loads(answer.read()).get("apns_id") is not None)
            print(connection.sock.version(), connection.sock.selected_alpn_protocol())
            """
        let python = try Tool.run(
            Self.python, ["-c", script, String(port), files.caFile, token, PushFixture.sealed])
        #expect(python.status == 0, "\(python.errors)")
        let lines = python.output.split(separator: "\n")
        #expect(lines.prefix(3).allSatisfy { $0 == "200 True" }, "\(python.output)")
        #expect(lines.last == "TLSv1.3 http/1.1", "\(python.output)")
        #expect(fixture.waitForDeliveries(4).count == 4)
        // A client that does not trust the CA is refused by its own check, before any request.
        let untrusted = try Tool.run(Self.curl, ["-sS", "https://127.0.0.1:\(port)/healthz"])
        #expect(untrusted.status == 60, "\(untrusted.errors)")
    }

    /// TLS 1.0 and 1.1 get `protocol_version`, an offer of only `h2` gets `no_application_protocol`, plain HTTP is
    /// closed; each is counted by kind, and none is logged.
    @Test func oldVersionsAnH2OnlyOfferAndPlainHTTPAreRefusedAndCountedNotLogged() throws {
        let files = try PairFiles(try SimulatorPKI.generate())
        let fixture = try Self.fixture(files, extra: #""metrics_listen":"127.0.0.1:0""#)
        let connect = ["s_client", "-connect", "127.0.0.1:\(fixture.relay.port)", "-CAfile", files.caFile]
        for version in ["-tls1", "-tls1_1"] {
            // The client's own security level would refuse these versions before asking.
            let old = try Tool.run(Self.openssl, connect + [version, "-cipher", "DEFAULT:@SECLEVEL=0"])
            #expect(old.status != 0)
            #expect(
                old.output.contains("Cipher is (NONE)") || old.errors.contains("alert protocol version"),
                "\(old.errors)")
            #expect(old.errors.contains("alert protocol version"), "\(version): \(old.errors)")
        }
        let h2 = try Tool.run(Self.openssl, connect + ["-alpn", "h2"])
        #expect(h2.errors.contains("alert no application protocol"), "\(h2.errors)")
        let http11 = try Tool.run(Self.openssl, connect + ["-alpn", "h2,http/1.1", "-verify_return_error"])
        #expect(http11.output.contains("ALPN protocol: http/1.1"), "\(http11.output)")
        #expect(http11.output.contains("Verify return code: 0 (ok)"), "\(http11.output)")

        let plain = try fixture.relay.connect()
        try plain.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(plain.isClosedByPeer(within: 5))

        try Poll.wait(for: "the failures counted", within: .seconds(5)) {
            let text = (try? Self.metrics(fixture)) ?? ""
            return text.contains(#"duo_relay_tls_handshake_failures_total{kind="protocol"} 3"#)
                && text.contains(#"duo_relay_tls_handshake_failures_total{kind="alpn"} 1"#)
        }
        let metrics = try Self.metrics(fixture)
        #expect(metrics.contains(#"duo_relay_tls_handshake_failures_total{kind="timeout"} 0"#))
        #expect(metrics.contains("# TYPE duo_relay_tls_certificate_expiry_timestamp_seconds gauge"))
        // No line per failed handshake, and never an address.
        let log = fixture.relay.standardError
        #expect(!log.contains("handshake") && !log.contains("127.0.0.1:\(fixture.relay.port + 0) "), "\(log)")
        #expect(
            log.split(separator: "\n").filter { $0.contains("127.0.0.1") && !$0.contains("listen") }
                .allSatisfy { $0.contains("origin") || $0.contains("metrics") }, "\(log)")
    }

    @Test func aClientStalledMidHandshakeIsCutOffAtTheDeadline() throws {
        let files = try PairFiles(try SimulatorPKI.generate())
        let fixture = try Self.fixture(files, extra: #""server":{"connection_timeout_s":1}"#)
        let stalled = try fixture.relay.connect()
        let start = ContinuousClock.now
        // A ClientHello's first bytes, and no more.
        try stalled.send([0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00, 0xc4, 0x03, 0x03])
        #expect(stalled.isClosedByPeer(within: 10))
        let waited = ContinuousClock.now - start
        #expect(waited >= .milliseconds(900) && waited < .seconds(4), "\(waited)")
        // Serving goes on for others.
        let files2 = files
        let healthy = try Tool.run(
            Self.curl, ["-sS", "--cacert", files2.caFile, "https://127.0.0.1:\(fixture.relay.port)/healthz"])
        #expect(healthy.output == #"{"status":"ok"}"#, "\(healthy.errors)")
    }

    /// A renewal lands by SIGHUP while a client pushes over keep-alive: no push fails, the connection open before
    /// goes on with the old certificate, and every connection made after the reload sees the new one.
    @Test func aRenewalBySighupUnderKeepAlivePushesLosesNoneAndNewConnectionsSeeTheNewCertificate() throws {
        let first = try SimulatorPKI.generate()
        let renewed = try SimulatorPKI.generate()
        let files = try PairFiles(first, trusting: [renewed])
        let fixture = try Self.fixture(files)
        let oldFingerprint = try #require(
            Self.fingerprint(in: fixture.relay.standardError, after: "duo-relay: tls: certificate"))
        let token = PushFixture.hex64().lowercased()
        // Pushes on one keep-alive connection for `seconds`, at about 100 a second; a fresh connection every 100 ms
        // prints the fingerprint it was served, as `F <fingerprint>`; each answer as `P <status>`.
        let script = """
            import hashlib, http.client, json, socket, ssl, sys, threading, time
            port, cafile, token, sealed, seconds = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
            context = ssl.create_default_context(cafile=cafile)
            connection = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
            connection.request("POST", "/v1/grant", json.dumps({"token": token, "environment": "sandbox"}))
            grant = json.loads(connection.getresponse().read())["grant"]
            end = time.monotonic() + seconds
            lines = []
            def fresh():
                while time.monotonic() < end:
                    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                        with context.wrap_socket(raw, server_hostname="localhost") as tls:
                            lines.append("F " + hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest().upper())
                    time.sleep(0.1)
            watcher = threading.Thread(target=fresh)
            watcher.start()
            n = 0
            while time.monotonic() < end:
                n += 1
                connection.request("POST", "/v1/push", json.dumps(
                    {"grant": grant, "sealed": sealed, "id": "%064X" % n, "thread": "%064X" % n}))
                answer = connection.getresponse()
                answer.read()
                lines.append("P %d" % answer.status)
                time.sleep(0.01)
            first = hashlib.sha256(connection.sock.getpeercert(binary_form=True)).hexdigest().upper()
            watcher.join()
            print("\\n".join(lines))
            print("K " + first)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = ["-c", script, String(fixture.relay.port), files.caFile, token, PushFixture.sealed, "5"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        Thread.sleep(forTimeInterval: 1.5)
        // certbot's renewal: new files in place, then the deploy hook's SIGHUP.
        try files.write(renewed)
        fixture.relay.signal(SIGHUP)
        try Poll.wait(for: "the reloaded line", within: .seconds(10)) {
            fixture.relay.standardError.contains("duo-relay: reloaded: ")
        }
        let newFingerprint = try #require(
            Self.fingerprint(in: fixture.relay.standardError, after: "duo-relay: reloaded: "))
        #expect(newFingerprint != oldFingerprint)
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let lines = text.split(separator: "\n")
        let pushes = lines.filter { $0.hasPrefix("P ") }
        #expect(pushes.count >= 100, "\(pushes.count) pushes")
        #expect(pushes.allSatisfy { $0 == "P 200" }, "\(pushes.filter { $0 != "P 200" })")
        // The keep-alive connection kept the certificate it started with.
        #expect(lines.last == "K \(oldFingerprint)")
        // Fresh connections: the old certificate until the reload, the new one from then on, never back.
        let seen = lines.filter { $0.hasPrefix("F ") }.map { String($0.dropFirst(2)) }
        #expect(seen.allSatisfy { $0 == oldFingerprint || $0 == newFingerprint })
        let firstNew = try #require(seen.firstIndex(of: newFingerprint), "\(seen)")
        #expect(firstNew > 0 && seen[firstNew...].allSatisfy { $0 == newFingerprint }, "\(seen)")
        #expect(fixture.waitForDeliveries(pushes.count).count == pushes.count)
    }

    /// A key that is not the certificate's: `check` refuses it naming `tls`, and so does SIGHUP, the running pair
    /// serving on.
    @Test func aMismatchedPairIsRefusedByCheckAndBySighupWhileServingGoesOn() throws {
        let pki = try SimulatorPKI.generate()
        let files = try PairFiles(pki)
        let fixture = try Self.fixture(files)
        let servedFingerprint = try #require(
            Self.fingerprint(in: fixture.relay.standardError, after: "duo-relay: tls: certificate"))
        try files.write(pki, keyOf: try SimulatorPKI.generate())
        let config = fixture.relay.directory.appendingPathComponent("relay.json").path
        let check = try CommandRun.run(["check", "--config", config], environment: fixture.secrets.environment)
        #expect(check.status == 1)
        #expect(
            check.standardError.contains("check failed: tls: the private key does not match the certificate"),
            "\(check.standardError)")

        fixture.relay.signal(SIGHUP)
        try Poll.wait(for: "the refusal", within: .seconds(10)) {
            fixture.relay.standardError.contains("reload refused")
        }
        #expect(
            fixture.relay.standardError.contains(
                "reload refused, keeping the running configuration and certificate: tls: the private key does not "
                    + "match the certificate"), "\(fixture.relay.standardError)")
        #expect(!fixture.relay.standardError.contains("duo-relay: reloaded: "))
        let served = try Tool.run(
            Self.python,
            [
                "-c",
                """
                import hashlib, socket, ssl, sys
                context = ssl.create_default_context(cafile=sys.argv[2])
                with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as raw:
                    with context.wrap_socket(raw, server_hostname="localhost") as tls:
                        print(hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest().upper())
                """,
                String(fixture.relay.port), files.caFile,
            ])
        #expect(served.output.trimmingCharacters(in: .whitespacesAndNewlines) == servedFingerprint, "\(served.errors)")
    }

    /// `check` names the pair it validated, warns when it expires within 14 days, and refuses an expired
    /// certificate or a key every user can read.
    @Test func checkValidatesThePairWarnsUnderFourteenDaysAndRefusesWhatServeWould() throws {
        let fixture = try PushFixture()
        let soon = try SimulatorPKI.generate(validDays: 5)
        let files = try PairFiles(soon)
        let path = files.directory + "/relay.json"
        func check(_ extra: String) throws -> CommandRun {
            try fixture.relayConfigText.dropLast().appending("," + extra + "}").write(
                toFile: path, atomically: true, encoding: .utf8)
            return try CommandRun.run(["check", "--config", path], environment: fixture.secrets.environment)
        }
        let expiring = try check(files.config)
        #expect(expiring.status == 0, "\(expiring.standardError)")
        #expect(expiring.standardOutput.contains("tls: certificate subject CN=localhost, expires "))
        // Five days from when it was made, which is a moment ago.
        #expect(
            expiring.standardError.contains("check: warning: the tls certificate expires in 4 days")
                || expiring.standardError.contains("check: warning: the tls certificate expires in 5 days"),
            "\(expiring.standardError)")
        let openssl = try Tool.run(
            Self.openssl, ["x509", "-in", files.certificate, "-noout", "-fingerprint", "-sha256"])
        let fingerprint = try #require(openssl.output.split(separator: "=").last).trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(expiring.standardOutput.contains("SHA-256 \(fingerprint)"), "\(expiring.standardOutput)")

        try files.write(try SimulatorPKI.generate(validDays: 90))
        let fine = try check(files.config)
        #expect(fine.status == 0 && !fine.standardError.contains("warning"), "\(fine.standardError)")

        try files.write(try SimulatorPKI.generate(validDays: -1))
        let expired = try check(files.config)
        #expect(expired.status == 1)
        #expect(
            expired.standardError.contains("check failed: tls: the certificate expired on "), "\(expired.standardError)"
        )

        try files.write(try SimulatorPKI.generate(), keyMode: 0o644)
        let readable = try check(files.config)
        #expect(readable.status == 1)
        #expect(
            readable.standardError.contains("check failed: tls.key_file: is readable by every user (mode 644)"),
            "\(readable.standardError)")

        let unknown = try check(
            #""tls":{"certificate_file":"\#(files.certificate)","key_file":"\#(files.key)","ca":1}"#)
        #expect(unknown.standardError.contains("tls.ca: is not a known configuration key"), "\(unknown.standardError)")
        // serve refuses what check refuses, naming the same key.
        let serve = try RelayProcess(
            arguments: ["serve", "--config", path], environment: fixture.secrets.environment)
        #expect(try serve.waitForExit() == 1)
        #expect(serve.standardError.contains("tls.ca: is not a known configuration key"), "\(serve.standardError)")
    }
}
