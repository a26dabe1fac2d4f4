import APNsSimulator
import Foundation
import RelayTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// docs/DESIGN.md, "Lifecycle": restarts and upgrades that refuse nobody. With `listen: "systemd"` the relay takes
/// the listening socket the service manager passes; the socket outlives each process, so connections that come
/// while one process stops and the next starts wait in its backlog. Tested without systemd as PID 1: the test holds
/// the socket and starts each process with it on descriptor 3, as systemd does for a service with a socket unit.
@Suite(.serialized) struct SocketActivationTests {
    static let generousLimits =
        #""ip_limit":{"requests":100000,"period_s":10,"block_s":10},"push_limit":{"requests":100000,"period_s":60}"#

    /// What the trickle's pushes were answered.
    struct Trickle: Sendable {
        var answered200 = 0
        var failures: [String] = []
    }

    /// Five restarts and one swap of the binary (another copy of it, as an upgrade puts in place) under a steady 20
    /// pushes a second, each on a new connection as a simple channel does: every push is answered 200 and delivered
    /// once, and each process exits 0 on its SIGTERM.
    @Test func fiveRestartsAndABinarySwapUnderATrickleFailNoPush() throws {
        let fixture = try PushFixture(relayConfig: Self.generousLimits)
        let grants = try (0..<4).map { _ in try fixture.grant(token: PushFixture.hex64()) }
        try Self.restartUnderTrickle(fixture, "plain HTTP") { port in
            let outcome = Mutex(Trickle())
            let stop = Atomic<Bool>(false)
            // Four channels, each pushing every 200 ms on a new connection: 20 pushes a second in all.
            let channels = try (0..<4).map { channel in
                try JoinableThread {
                    var next = ContinuousClock.now + .milliseconds(50 * channel)
                    var sent = 0
                    // Bounded by the stop flag and by a count the test never reaches.
                    while !stop.load(ordering: .relaxed) && sent < 100_000 {
                        let (seconds, attoseconds) = (next - ContinuousClock.now).components
                        let wait = Double(seconds) + Double(attoseconds) / 1e18
                        // The channel's pace: one push every 200 ms.
                        if wait > 0 { Thread.sleep(forTimeInterval: wait) }
                        next = next + .milliseconds(200)
                        sent += 1
                        let result: String?
                        do {
                            let client = try RawHTTPClient(port: port, timeoutSeconds: 30)
                            let answer = try client.request(
                                "POST", "/v1/push", body: PushFixture.pushBody(grant: grants[channel]))
                            result = answer.status == 200 ? nil : "\(answer.status) \(answer.text)"
                        } catch {
                            result = "\(error)"
                        }
                        outcome.withLock { trickle in
                            if let result {
                                trickle.failures.append("channel \(channel): \(result)")
                            } else {
                                trickle.answered200 += 1
                            }
                        }
                    }
                }
            }
            return {
                stop.store(true, ordering: .relaxed)
                for channel in channels { channel.join() }
                return outcome.withLock { $0 }
            }
        }
    }

    /// The same restarts and swap with the relay's own TLS on the passed socket: the trickle's clients are Python's
    /// `ssl` verifying the chain and the host name, each push on a new TLS connection, so that every restart meets
    /// clients in their handshake as well as in their request. None fails, every push is delivered once.
    @Test func fiveRestartsAndABinarySwapUnderATLSTrickleFailNoPush() throws {
        let files = try TLSFrontTests.PairFiles(try SimulatorPKI.generate())
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let fixture = try PushFixture(relayConfig: Self.generousLimits + "," + files.config)
        try Self.restartUnderTrickle(fixture, "TLS") { port in
            let trickle = try TLSTrickle(port: port, caFile: files.caFile, directory: files.directory)
            return { try trickle.stop() }
        }
    }

    /// Runs `trickle` against relays started in turn on one held socket with `fixture`'s configuration (`listen`
    /// made `"systemd"`; `what` names the trickle in the printed line): the first, five restarts of the same binary and a swap to a copy of it, two seconds apart,
    /// each a SIGTERM, the wait for its exit 0 and the next start, as systemd restarts a service. `trickle` starts
    /// the traffic on the socket's port and returns what stops it and reports what its pushes were answered.
    static func restartUnderTrickle(
        _ fixture: PushFixture, _ what: String, trickle: (_ port: UInt16) throws -> () throws -> Trickle
    ) throws {
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let configPath = directory.appendingPathComponent("relay.json").path
        let config = fixture.relayConfigText.replacingOccurrences(
            of: #""listen":"127.0.0.1:0""#, with: #""listen":"systemd""#)
        #expect(config.contains(#""listen":"systemd""#))
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        let upgraded = directory.appendingPathComponent("duo-relay-upgraded").path
        try FileManager.default.copyItem(atPath: RelayProcess.binary.path, toPath: upgraded)

        // The socket, held here as systemd holds it (its descriptor is close-on-exec; each relay gets it as 3).
        let held = try SilentListener(backlog: 4096)
        let logPath = directory.appendingPathComponent("relay.log").path
        func start(_ binary: String) throws -> ActivatedRelay {
            let relay = try ActivatedRelay(
                binary: binary, configPath: configPath, environment: fixture.secrets.environment,
                socket: held.descriptor, logPath: logPath)
            try relay.waitUntilServing()
            return relay
        }

        var relay = try start(RelayProcess.binary.path)
        let port = held.port
        let stop = try trickle(port)
        let started = ContinuousClock.now
        let binaries = Array(repeating: RelayProcess.binary.path, count: 5) + [upgraded]
        for (index, binary) in binaries.enumerated() {
            Thread.sleep(forTimeInterval: 2)
            // A restart as systemd makes it: SIGTERM, wait for the exit, start the next process.
            relay.signal(SIGTERM)
            let status = try relay.waitForExit()
            #expect(status == 0, "process \(index) exited \(status)")
            relay = try start(binary)
        }
        Thread.sleep(forTimeInterval: 2)
        let outcome = try stop()
        let elapsed = ContinuousClock.now - started
        relay.signal(SIGTERM)
        #expect(try relay.waitForExit() == 0)

        print(
            "SocketActivationTests (\(what)): \(outcome.answered200) pushes answered 200, \(outcome.failures.count) failed, "
                + "over 5 restarts and a binary swap in \(elapsed)")
        #expect(outcome.failures.isEmpty, "\(outcome.failures.prefix(5))")
        // About 20 a second for 14 s and more: most of them sent.
        #expect(outcome.answered200 >= 200)
        #expect(fixture.waitForDeliveries(outcome.answered200).count == outcome.answered200)
        let log = try String(contentsOfFile: logPath, encoding: .utf8)
        #expect(log.components(separatedBy: "listening on the socket systemd passed, port \(port)").count == 8)
        #expect(!log.contains("cannot"))
        for secret in fixture.secrets.secretStrings { #expect(!log.contains(secret)) }
    }

    /// `listen: "systemd"` without a socket passed: the start is refused, naming `listen` and what is missing.
    @Test func withoutAPassedSocketTheStartIsRefusedNamingListen() throws {
        let secrets = TestSecrets()
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("relay.json").path
        try RelayProcess.config().replacingOccurrences(of: #""listen":"127.0.0.1:0""#, with: #""listen":"systemd""#)
            .write(toFile: path, atomically: true, encoding: .utf8)
        let refused = try RelayProcess(
            arguments: ["serve", "--config", path], environment: secrets.environment, directory: directory)
        #expect(try refused.waitForExit() != 0)
        #expect(refused.standardError.contains("listen"))
        #expect(refused.standardError.contains("no socket was passed"), "\(refused.standardError)")
        // Meant for another process: refused too.
        let other = try RelayProcess(
            arguments: ["serve", "--config", path],
            environment: secrets.environment.merging(["LISTEN_PID": "1", "LISTEN_FDS": "1"]) { _, new in new },
            directory: directory)
        #expect(try other.waitForExit() != 0)
        #expect(other.standardError.contains("meant for another process"), "\(other.standardError)")
        // `check` does not listen: it passes without the socket, as it does in ExecStartPre.
        let check = try RelayProcess(
            arguments: ["check", "--config", path], environment: secrets.environment, directory: directory)
        #expect(try check.waitForExit() == 0, "\(check.allOutput)")
    }
}

extension SocketActivationTests {
    /// Four channels of Python's `ssl`, each pushing every 200 ms on a new TLS connection (20 pushes a second in all)
    /// that verifies the chain against the test's CA and the host name `localhost`, until ``stop()``. Each channel
    /// mints its grant through the relay first.
    ///
    /// Told to stop by a file, its results read from a file: the relays started meanwhile inherit this process's
    /// descriptors, so a pipe to the script would not end while they run (and a child of the test may start with
    /// SIGTERM blocked).
    final class TLSTrickle {
        static let script = """
            import http.client, json, os, socket, ssl, sys, threading, time
            port, cafile, sealed, results = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
            context = ssl.create_default_context(cafile=cafile)
            class Connection(http.client.HTTPSConnection):
                # To the held socket's address, verifying the chain and the name localhost.
                def connect(self):
                    raw = socket.create_connection(("127.0.0.1", port), timeout=self.timeout)
                    self.sock = context.wrap_socket(raw, server_hostname="localhost")
            def post(path, body):
                connection = Connection("localhost", port, timeout=30)
                try:
                    connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
                    answer = connection.getresponse()
                    return answer.status, answer.read()
                finally:
                    connection.close()
            def finish(lines):
                with open(results + ".new", "w") as file:
                    file.write("".join(line + "\\n" for line in lines) + "END\\n")
                os.rename(results + ".new", results)
            grants = []
            for n in range(4):
                status, body = post("/v1/grant", {"token": os.urandom(32).hex(), "environment": "sandbox"})
                if status != 200:
                    finish(["E grant: %d %r" % (status, body[:200])])
                    sys.exit(1)
                grants.append(json.loads(body)["grant"])
            stop = threading.Event()
            lines = []
            def channel(n):
                due = time.monotonic() + 0.05 * n
                sent = 0
                # Bounded by the stop and by a count the test never reaches.
                while not stop.is_set() and sent < 100000:
                    if stop.wait(max(0.0, due - time.monotonic())):
                        break
                    due += 0.2
                    sent += 1
                    push = {"grant": grants[n], "sealed": sealed, "id": os.urandom(32).hex().upper(),
                            "thread": os.urandom(32).hex().upper()}
                    try:
                        status, body = post("/v1/push", push)
                        lines.append("P 200" if status == 200 else "E channel %d: %d %r" % (n, status, body[:200]))
                    except Exception as error:
                        lines.append("E channel %d: %r" % (n, error))
            threads = [threading.Thread(target=channel, args=(n,)) for n in range(4)]
            for thread in threads:
                thread.start()
            open(results + ".started", "w").close()
            # Until the test makes the stop file; bounded.
            deadline = time.monotonic() + 300
            while not os.path.exists(results + ".stop") and time.monotonic() < deadline:
                time.sleep(0.1)
            stop.set()
            for thread in threads:
                thread.join()
            finish(lines)
            """

        private let process = Process()
        private let results: String

        /// Starts the channels against 127.0.0.1:`port`, trusting `caFile`; returns once every channel has its grant.
        init(port: UInt16, caFile: String, directory: String) throws {
            results = directory + "/tls-trickle.txt"
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = ["-c", Self.script, String(port), caFile, PushFixture.sealed, results]
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            _ = FileManager.default.createFile(atPath: results + ".err", contents: nil)
            process.standardError = FileHandle(forWritingAtPath: results + ".err")
            try process.run()
            let started = results + ".started"
            try Poll.wait(for: "the TLS trickle's grants", within: .seconds(30)) {
                if FileManager.default.fileExists(atPath: started) { return true }
                if FileManager.default.fileExists(atPath: results) || !process.isRunning {
                    throw TestFailure("the TLS trickle did not start: \(self.text) \(self.errors)")
                }
                return false
            }
        }

        private var text: String { (try? String(contentsOfFile: results, encoding: .utf8)) ?? "" }
        /// What Python printed on its standard error (a traceback), its last lines.
        private var errors: String {
            String(((try? String(contentsOfFile: results + ".err", encoding: .utf8)) ?? "").suffix(1000))
        }

        /// Stops the channels and reads what each push was answered.
        func stop() throws -> Trickle {
            guard FileManager.default.createFile(atPath: results + ".stop", contents: nil) else {
                throw TestFailure("cannot make \(results).stop")
            }
            // Each channel finishes the push it is in (30 s at most).
            try Poll.wait(for: "the TLS trickle's results", within: .seconds(60)) { text.hasSuffix("END\n") }
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            var trickle = Trickle()
            for line in text.split(separator: "\n").dropLast() {
                if line == "P 200" {
                    trickle.answered200 += 1
                } else {
                    trickle.failures.append(String(line))
                }
            }
            return trickle
        }

        deinit {
            if process.isRunning { process.terminate() }
        }
    }
}
