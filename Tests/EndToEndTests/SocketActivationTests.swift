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
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let configPath = directory.appendingPathComponent("relay.json").path
        let config = fixture.relayConfigText.replacingOccurrences(
            of: #""listen":"127.0.0.1:0""#, with: #""listen":"systemd""#)
        #expect(config.contains(#""listen":"systemd""#))
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        let upgraded = directory.appendingPathComponent("duo-relay-upgraded").path
        try FileManager.default.copyItem(atPath: RelayProcess.binary.path, toPath: upgraded)
        let grants = try (0..<4).map { _ in try fixture.grant(token: PushFixture.hex64()) }

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
        let outcome = Mutex(Trickle())
        let stop = Atomic<Bool>(false)
        let port = held.port
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
        stop.store(true, ordering: .relaxed)
        for channel in channels { channel.join() }
        let elapsed = ContinuousClock.now - started
        relay.signal(SIGTERM)
        #expect(try relay.waitForExit() == 0)

        let trickle = outcome.withLock { $0 }
        print(
            "SocketActivationTests: \(trickle.answered200) pushes answered 200, \(trickle.failures.count) failed, "
                + "over 5 restarts and a binary swap in \(elapsed)")
        #expect(trickle.failures.isEmpty, "\(trickle.failures.prefix(5))")
        // About 20 a second for 14 s and more: most of them sent.
        #expect(trickle.answered200 >= 200)
        #expect(fixture.waitForDeliveries(trickle.answered200).count == trickle.answered200)
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
