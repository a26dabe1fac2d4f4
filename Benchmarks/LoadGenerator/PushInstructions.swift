import Foundation
import Glibc

/// `push-instructions`: the relay's user-space instructions per push under valgrind's callgrind
/// (scripts/push-instructions drives it; BENCHMARKS.md explains the figures). It starts the APNs simulator, the
/// relay under callgrind (and redis-server, tinyproxy, nginx when asked) on free loopback ports, stopped by PID;
/// warms up at the rate, dumps the counters (a dump resets them), pushes for the measured window, dumps again and
/// reads the last dump: instructions per push, by library, the functions that spend the most.
final class PushInstructions {
    struct Options {
        var relayBinary: String
        var callgrindByLibrary: String
        /// As given (it is printed): pushes a second.
        var rate: String
        var seconds: String
        var redis: Bool
        var tinyproxy: Bool
        var nginx: Bool
        var keep: String?

        init(_ arguments: Arguments) throws(LoadError) {
            relayBinary = try arguments.string("relay-bin")
            callgrindByLibrary = arguments.string("callgrind-by-library", default: "scripts/callgrind-by-library")
            rate = arguments.string("rate", default: "100")
            seconds = arguments.string("seconds", default: "10")
            guard let rateValue = Double(rate), rateValue > 0, let secondsValue = Double(seconds), secondsValue > 0
            else { throw LoadError(.usage, "--rate and --seconds must be positive numbers") }
            switch arguments.string("store", default: "memory") {
            case "memory", "": redis = false
            case "redis": redis = true
            default: throw LoadError(.usage, "--store must be memory or redis")
            }
            switch arguments.string("proxy", default: "") {
            case "": tinyproxy = false
            case "tinyproxy": tinyproxy = true
            default: throw LoadError(.usage, "--proxy must be tinyproxy (or empty: APNs directly)")
            }
            nginx = !arguments.string("nginx", default: "").isEmpty
            keep = arguments.all("keep").last.flatMap { $0.isEmpty ? nil : $0 }
        }
    }

    let options: Options
    let load: String
    let work: String
    let apns: BenchSimulator.Files
    var bodies: String { work + "/bodies.txt" }
    /// The servers beside the relay, each with the signal that stops it.
    var children: [(BenchChild, Int32)] = []
    var relay: BenchChild?

    static func run(_ arguments: Arguments) throws -> Int32 {
        let options = try Options(arguments)
        let (load, work) = try BenchChild.prepareRun("push-instructions")
        let run = PushInstructions(options: options, load: load, work: work)
        defer { run.cleanUp() }
        do {
            try run.measure()
        } catch let error as LoadError {
            if !BenchChild.live.interrupted { log(error.reason) }
            return BenchChild.live.interrupted ? 130 : 1
        }
        return 0
    }

    private init(options: Options, load: String, work: String) {
        self.options = options
        self.load = load
        self.work = work
        apns = .init(directory: work + "/apns")
    }

    static func log(_ line: String) { LoadCommand.write("push-instructions: " + line, to: STDERR_FILENO) }

    // MARK: - The relay

    func measure() throws {
        try BenchSimulator.prepare(apns)
        guard let keys = BenchChild.output(options.relayBinary, ["keygen", "--id", "1"]) else {
            throw LoadError(.failed, "\(options.relayBinary) keygen failed")
        }
        let simulatorPort = try startSimulator()
        let redisPort = options.redis ? try startRedis() : nil
        let proxyPort = options.tinyproxy ? try startTinyproxy() : nil
        try PushInstructionsReadings.relayConfiguration(
            simulatorPort: simulatorPort, caFile: apns.caCertificate, redisPort: redisPort, proxyPort: proxyPort
        ).write(toFile: work + "/relay.json", atomically: true, encoding: .utf8)
        let environment = [
            "RELAY_KEYS": keys.trimmingCharacters(in: .whitespacesAndNewlines), "APNS_TEAM_ID": BenchSimulator.teamID,
            "APNS_KEY_ID_SANDBOX": BenchSimulator.keyID,
            "APNS_KEY_SANDBOX": BenchRun.read(apns.apnsKey).trimmingCharacters(in: .newlines),
        ]
        let relay = try BenchChild(
            "valgrind",
            [
                "--tool=callgrind", "--callgrind-out-file=\(work)/callgrind.out", options.relayBinary, "serve",
                "--config", work + "/relay.json",
            ], environment: environment, error: .file(work + "/relay.log"))
        self.relay = relay
        guard
            let relayPort = BenchRun.poll(
                600, interval: 0.1,
                {
                    BenchReadings.listeningPort(log: BenchRun.read(self.work + "/relay.log"))
                })
        else {
            LoadCommand.write(BenchRun.read(work + "/relay.log"), to: STDERR_FILENO)
            throw LoadError(.failed, "the relay did not start")
        }
        let target = "127.0.0.1:\(relayPort)"
        try step(["mint", "--target", target, "--count", "512", "--out", bodies])
        let pushes = try count(relay, target: target, name: "", failure: "not every push answered 200")
        let measured = work + "/measured.out"
        let annotation = annotate([measured])
        guard let total = PushInstructionsReadings.programTotal(annotation) else {
            throw LoadError(.failed, "callgrind_annotate gave no program total")
        }
        let limits = options.redis ? "redis" : "memory"
        let through = options.tinyproxy ? ", APNs through tinyproxy" : ""
        write(
            "instructions per push: \(total / pushes) (\(pushes) pushes at \(options.rate)/s, limits in \(limits)"
                + "\(through); user space, every relay thread)")
        // A worker opens its APNs connection with its first push; under valgrind one worker may accept every
        // warm-up connection, so the other's TLS handshake (about 5 million instructions) can fall in the measured
        // window. Say so.
        var handshakePerPush = 0
        if let handshakes = PushInstructionsReadings.handshakes(annotate(["--inclusive=yes", measured])),
            handshakes > 0
        {
            handshakePerPush = handshakes / pushes
            write(
                "  (a TLS handshake to APNs fell in the window: \(handshakePerPush) of those a push; "
                    + "\((total - handshakes) / pushes) without it)")
        }
        let relayLibraries = try libraries(measured, requests: pushes, into: "relay-libraries.txt")
        for line in relayLibraries.split(separator: "\n") { write("  " + line) }
        for line in PushInstructionsReadings.topFunctions(annotate(["--threshold=100", measured])) { write(line) }
        if options.nginx {
            relay.stop()
            self.relay = nil
            try measureNginx(relayLibraries: relayLibraries, handshakePerPush: handshakePerPush)
        }
    }

    /// Warms `process` (under callgrind, its dumps `<name>callgrind.out.N`) up at the rate, resets its counters,
    /// sends for the measured window (the answers in `<name>load.json`) and moves its last dump to
    /// `<name>measured.out`: the answers, every one a 200, or `failure`.
    private func count(_ process: BenchChild, target: String, name: String, failure: String) throws -> Int {
        let loop = ["open-loop", "--target", target, "--bodies", bodies, "--rate", options.rate]
        try step(loop + ["--seconds", "2", "--warmup", "0", "--connections", "16"])
        // A dump resets the counters: the next dump holds the measured window only.
        dump(process)
        let answers = work + "/\(name)load.json"
        try step(loop + ["--seconds", options.seconds, "--warmup", "0", "--connections", "16"], output: answers)
        dump(process)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []
        guard let last = PushInstructionsReadings.lastDump(names, prefix: name + "callgrind.out") else {
            throw LoadError(.failed, "callgrind wrote no dump")
        }
        try FileManager.default.moveItem(atPath: work + "/" + last, toPath: work + "/\(name)measured.out")
        guard let requests = PushInstructionsReadings.allAnswered200(BenchRun.read(answers)) else {
            LoadCommand.write(BenchRun.read(answers), to: STDERR_FILENO)
            throw LoadError(.failed, failure)
        }
        return requests
    }

    // MARK: - The anchor

    /// nginx proxying the same bodies at the same rate, counted the same way. The upstream (not counted) answers
    /// 200 at once over TLS with the simulator's certificate; the proxy runs as one process under callgrind.
    private func measureNginx(relayLibraries: String, handshakePerPush: Int) throws {
        let directory = work + "/nginx"
        var started: (BenchChild, Int)?
        for _ in 0..<20 where started == nil {
            let upstreamPort = try BenchRun.freePort()
            let proxyPort = try BenchRun.freePort()
            guard upstreamPort != proxyPort else { continue }
            let upstream = try nginxInstance(
                "upstream", directory: directory,
                body: BenchFiles.nginxUpstream(
                    port: upstreamPort, certificate: apns.certificate, key: apns.certificateKey),
                under: nil)
            let proxy = try nginxInstance(
                "proxy", directory: directory,
                body: BenchFiles.nginxProxy(port: proxyPort, upstreamPort: upstreamPort, caFile: apns.caCertificate),
                under: work + "/nginx-callgrind.out")
            let answered = BenchRun.poll(100, interval: 0.1) {
                BenchChild.output(
                    "curl",
                    [
                        "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "--data", "{}",
                        "http://127.0.0.1:\(proxyPort)/v1/push",
                    ], error: .discard) == "200" ? true : nil
            }
            if answered == true {
                started = (proxy, proxyPort)
            } else {
                for child in [upstream, proxy] { child.stop() }
                children.removeLast(2)
            }
        }
        guard let (proxy, proxyPort) = started else {
            for name in ["upstream", "proxy"] {
                LoadCommand.write(BenchRun.read("\(directory)/\(name).log"), to: STDERR_FILENO)
            }
            throw LoadError(.failed, "nginx did not start")
        }
        let requests = try count(
            proxy, target: "127.0.0.1:\(proxyPort)", name: "nginx-",
            failure: "not every request through nginx answered 200")
        let nginxLibraries = try libraries(
            work + "/nginx-measured.out", requests: requests, into: "nginx-libraries.txt")
        let nginxTotal = PushInstructionsReadings.inAll(nginxLibraries) ?? ""
        write(
            "nginx: instructions per proxied request: \(nginxTotal) k (\(requests) requests at \(options.rate)/s, "
                + "the same bodies)")
        write("side by side (thousands of instructions per request; relay | nginx):")
        for line in PushInstructionsReadings.sideBySide(relayLibraries, nginxLibraries) { write(line) }
        // The libraries the stack requires for a push (HTTP/2 to APNs, TLS, the grant, the phone's key) against all
        // of nginx's instructions: BENCHMARKS.md, "Out of reach", explains why this decides whether
        // push_cpu_us_at_1000 can reach nginx's.
        let required = PushInstructionsReadings.requiredLibraries(relayLibraries, handshakePerPush: handshakePerPush)
        write(
            "the relay's required libraries (nghttp2, libcrypto, libssl): \(required) k a push; "
                + "nginx in all: \(nginxTotal) k")
    }

    /// One nginx in the foreground (the proxy without its master process, so that callgrind counts the one process
    /// that serves), under callgrind if `under` names its profile.
    private func nginxInstance(_ name: String, directory: String, body: String, under profile: String?) throws
        -> BenchChild
    {
        try FileManager.default.createDirectory(atPath: "\(directory)/\(name)-temp", withIntermediateDirectories: true)
        let head = profile == nil ? "" : "master_process off;\n"
        try (head + BenchFiles.nginxConfiguration(name: name, directory: directory, body: body)).write(
            toFile: "\(directory)/\(name).conf", atomically: true, encoding: .utf8)
        let nginx = ["-p", directory, "-e", "\(directory)/\(name).log", "-c", "\(directory)/\(name).conf"]
        let child =
            if let profile {
                try BenchChild(
                    "valgrind", ["--tool=callgrind", "--callgrind-out-file=\(profile)", "nginx"] + nginx,
                    error: .file(work + "/nginx-valgrind.log"))
            } else {
                try BenchChild("nginx", nginx)
            }
        children.append((child, SIGTERM))
        return child
    }

    // MARK: - The servers beside the relay

    private func startSimulator() throws -> Int {
        let simulator = try BenchChild(
            load, ["simulator", "--dir", apns.directory], output: .file(work + "/sim.log"), error: .output)
        children.append((simulator, SIGTERM))
        guard
            let port = BenchRun.poll(
                100, interval: 0.1,
                {
                    Int(BenchRun.read(self.apns.port).trimmingCharacters(in: .whitespacesAndNewlines))
                })
        else {
            LoadCommand.write(BenchRun.read(work + "/sim.log"), to: STDERR_FILENO)
            throw LoadError(.failed, "the simulator did not start")
        }
        return port
    }

    /// A redis-server of its own on a free port, nothing kept on disk.
    private func startRedis() throws -> Int {
        for _ in 0..<20 {
            let port = try BenchRun.freePort()
            let server = try BenchChild(
                "redis-server",
                [
                    "--bind", "127.0.0.1", "--port", String(port), "--save", "", "--appendonly", "no", "--dir", work,
                    "--daemonize", "no", "--loglevel", "warning",
                ], output: .file(work + "/redis.log"), error: .output)
            let up = BenchRun.poll(100) {
                if BenchChild.output("redis-cli", ["-p", String(port), "PING"], error: .discard)?.contains("PONG")
                    == true
                {
                    return true
                }
                return server.isRunning ? nil : false
            }
            if up == true {
                children.append((server, SIGKILL))
                return port
            }
            server.stop(SIGKILL)
        }
        throw LoadError(.failed, "redis-server did not start")
    }

    /// A tinyproxy of its own on a free port (its instructions are its own, not counted).
    private func startTinyproxy() throws -> Int {
        for _ in 0..<20 {
            let port = try BenchRun.freePort()
            try PushInstructionsReadings.tinyproxyConfiguration(port: port, logFile: work + "/tinyproxy.log").write(
                toFile: work + "/tinyproxy.conf", atomically: true, encoding: .utf8)
            let proxy = try BenchChild(
                "tinyproxy", ["-d", "-c", work + "/tinyproxy.conf"], output: .discard, error: .discard)
            let up = BenchRun.poll(100) { Self.accepts(port: port) ? true : (proxy.isRunning ? nil : false) }
            if up == true {
                children.append((proxy, SIGKILL))
                return port
            }
            proxy.stop(SIGKILL)
        }
        throw LoadError(.failed, "tinyproxy did not start")
    }

    /// Whether something accepts a TCP connection on the loopback port.
    static func accepts(port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    // MARK: - Helpers

    /// Runs one of this binary's subcommands to its end; its output to `output` (or nowhere).
    private func step(_ arguments: [String], output: String? = nil) throws {
        let child = try BenchChild(load, arguments, output: output.map { .file($0) } ?? .discard)
        let status = child.wait()
        guard status == 0 else { throw LoadError(.failed, "duo-relay-load \(arguments[0]) exited with \(status)") }
    }

    /// Dumps (and so resets) the counters of `process`, running under callgrind.
    private func dump(_ process: BenchChild) {
        _ = BenchChild.output("callgrind_control", ["-d", String(process.pid)], error: .discard)
    }

    private func annotate(_ arguments: [String]) -> String {
        BenchChild.output("callgrind_annotate", arguments, error: .discard) ?? ""
    }

    /// `callgrind-by-library`'s table of `profile` per request, kept in the work directory as `file`.
    private func libraries(_ profile: String, requests: Int, into file: String) throws -> String {
        guard let table = BenchChild.output(options.callgrindByLibrary, [profile, String(requests)]) else {
            throw LoadError(.failed, "\(options.callgrindByLibrary) failed")
        }
        try table.write(toFile: work + "/" + file, atomically: true, encoding: .utf8)
        return table
    }

    private func write(_ line: some StringProtocol) { LoadCommand.write(String(line)) }

    func cleanUp() {
        relay?.stop()
        for (child, signal) in children.reversed() { child.stop(signal) }
        if let keep = options.keep {
            let manager = FileManager.default
            try? manager.createDirectory(atPath: keep, withIntermediateDirectories: true)
            for name in (try? manager.contentsOfDirectory(atPath: work)) ?? []
            where name.hasSuffix("measured.out") || name.hasSuffix(".log") {
                try? manager.removeItem(atPath: keep + "/" + name)
                try? manager.copyItem(atPath: work + "/" + name, toPath: keep + "/" + name)
            }
        }
        try? FileManager.default.removeItem(atPath: work)
    }
}
