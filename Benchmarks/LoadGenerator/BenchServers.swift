import Foundation
import Glibc

/// The servers a benchmark run starts and stops by PID, and its small helpers.
extension BenchRun {
    // MARK: - The stack: a fresh simulator and relay for each measurement

    func startStack() throws {
        try? FileManager.default.removeItem(atPath: apns.port)
        simulator = try BenchChild(
            load, ["simulator", "--dir", apns.directory], output: .file(work + "/sim.log"), error: .output)
        guard let port = Self.poll(600, { Int(Self.read(self.apns.port).trimmingCharacters(in: .whitespaces)) }) else {
            LoadCommand.write(Self.read(work + "/sim.log"), to: STDERR_FILENO)
            throw LoadError(.failed, "the simulator did not start")
        }
        simulatorPort = port
        var configuration = BenchFiles.relayConfiguration(
            simulatorPort: port, caFile: apns.caCertificate, storePort: storePort, threads: options.relayThreads,
            tls: servesTLS ? (front.certificate, front.key) : nil)
        var environment = [
            "REDIS_PASSWORD": redisPassword, "RELAY_KEYS": relayKeys, "APNS_TEAM_ID": BenchSimulator.teamID,
            "APNS_KEY_ID_SANDBOX": BenchSimulator.keyID,
            "APNS_KEY_SANDBOX": Self.read(apns.apnsKey).trimmingCharacters(in: .newlines),
        ]
        try relaySetup?(&configuration, &environment)
        try configuration.write(toFile: work + "/relay.json", atomically: true, encoding: .utf8)
        relay = try BenchChild(
            options.relayBinary, ["serve", "--config", work + "/relay.json"], environment: environment,
            error: .file(work + "/relay.log"))
        guard let relayPort = Self.poll(600, { BenchReadings.listeningPort(log: Self.read(self.work + "/relay.log")) })
        else {
            LoadCommand.write(Self.read(work + "/relay.log"), to: STDERR_FILENO)
            throw LoadError(.failed, "the relay did not start")
        }
        relayTarget = "127.0.0.1:\(relayPort)"
        // One push answered before any measurement: a fresh relay's first pushes wait for its APNs connection
        // (TLS, then one stream until a token is proven), which belongs to start-up, not to a fixed-rate run of
        // half a second (a smoke run's fixed 1,000/s run on a fresh debug relay can fall under 99 % answered 200).
        if let first = Self.read(bodies).split(separator: "\n").first {
            let body = work + "/first-body.json"
            try String(first).write(toFile: body, atomically: true, encoding: .utf8)
            // With tls, the front's certificate verified as any client verifies it.
            let url = (servesTLS ? "https://" : "http://") + "\(relayTarget)/v1/push"
            let trust = servesTLS ? ["--cacert", front.caCertificate] : []
            _ = Self.poll(50, interval: 0.1) {
                self.httpStatus(
                    trust + [
                        "--max-time", "5", "-H", "content-type: application/json", "--data-binary", "@" + body, url,
                    ]) == "200" ? true : nil
            }
        }
    }

    func stopStack() {
        relay?.stop()
        relay = nil
        if options.verbose {
            // The relay's last line counts its answers by outcome (never anything about a request).
            for line in Self.read(work + "/relay.log").split(separator: "\n") where line.contains("stopped;") {
                LoadCommand.write(String(line), to: STDERR_FILENO)
            }
        }
        simulator?.stop()
        simulator = nil
    }

    /// A local redis-server on a free port, nothing kept on disk; stopped by its PID.
    func startRedis() throws {
        for _ in 0..<20 {
            let port = try Self.freePort()
            let server = try BenchChild(
                "redis-server",
                [
                    "--bind", "127.0.0.1", "--port", String(port), "--save", "", "--appendonly", "no",
                    "--requirepass", redisPassword, "--dir", work, "--daemonize", "no", "--loglevel", "warning",
                ], output: .file(work + "/redis.log"), error: .output)
            let up = Self.poll(100) {
                if self.redisCommand(port, ["PING"])?.contains("PONG") == true { return true }
                return server.isRunning ? nil : false
            }
            if up == true {
                redis = server
                redisPort = port
                return
            }
            server.stop(SIGKILL)
        }
        throw LoadError(.failed, "redis-server did not start")
    }

    func redisCommand(_ port: Int, _ arguments: [String]) -> String? {
        // The password in the environment, not on redis-cli's command line.
        BenchChild.output(
            "redis-cli", ["-p", String(port)] + arguments, environment: ["REDISCLI_AUTH": redisPassword],
            error: .discard)
    }

    func redisInfo() -> RedisInfo { RedisInfo(redisCommand(redisPort, ["INFO", "all"]) ?? "") }

    /// The anchor: nginx from Debian, one worker, proxying HTTP/1.1 with keep-alive to an upstream over TLS (a
    /// second nginx, also one worker, with the simulator's certificate) that answers 200 at once. Its CPU is
    /// the proxy's only worker's.
    func startNginx() throws {
        let directory = work + "/nginx"
        for _ in 0..<20 {
            let upstreamPort = try Self.freePort()
            let proxyPort = try Self.freePort()
            guard upstreamPort != proxyPort else { continue }
            try nginxInstance(
                "upstream", directory: directory,
                body: BenchFiles.nginxUpstream(
                    port: upstreamPort, certificate: apns.certificate, key: apns.certificateKey))
            let proxy = try nginxInstance(
                "proxy", directory: directory,
                body: BenchFiles.nginxProxy(port: proxyPort, upstreamPort: upstreamPort, caFile: apns.caCertificate))
            let answered = Self.poll(100) {
                self.httpStatus(["-X", "POST", "--data", "{}", "http://127.0.0.1:\(proxyPort)/v1/push"]) == "200"
                    ? true : nil
            }
            if answered == true,
                let worker = BenchReadings.onlyChild(Self.read("/proc/\(proxy.pid)/task/\(proxy.pid)/children"))
            {
                nginxPort = proxyPort
                nginxWorker = worker
                return
            }
            stopNginx()
        }
        for name in ["upstream", "proxy"] {
            LoadCommand.write(Self.read("\(directory)/\(name).log"), to: STDERR_FILENO)
        }
        throw LoadError(.failed, "nginx did not start")
    }

    @discardableResult
    func nginxInstance(_ name: String, directory: String, body: String) throws -> BenchChild {
        try FileManager.default.createDirectory(atPath: "\(directory)/\(name)-temp", withIntermediateDirectories: true)
        try BenchFiles.nginxConfiguration(name: name, directory: directory, body: body).write(
            toFile: "\(directory)/\(name).conf", atomically: true, encoding: .utf8)
        let child = try BenchChild(
            "nginx", ["-p", directory, "-e", "\(directory)/\(name).log", "-c", "\(directory)/\(name).conf"])
        nginx.append(child)
        return child
    }

    func stopNginx() {
        for child in nginx { child.stop() }
        nginx = []
    }

    func httpStatus(_ arguments: [String]) -> String? {
        BenchChild.output("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}"] + arguments, error: .discard)
    }

    // MARK: - Helpers

    func cleanUp() {
        relay?.stop()
        forwarder?.stop()
        redis?.stop(SIGKILL)
        simulator?.stop()
        stopNginx()
        if let keep = options.keep {
            let manager = FileManager.default
            let destination =
                manager.fileExists(atPath: keep) ? keep + "/" + URL(fileURLWithPath: work).lastPathComponent : keep
            do { try manager.copyItem(atPath: work, toPath: destination) } catch {
                Self.log("could not keep the run's files in \(keep): \(error)")
            }
        }
        try? FileManager.default.removeItem(atPath: work)
    }

    /// Calls `ready` up to `attempts` times, `interval` seconds apart, until it gives a value.
    static func poll<T>(_ attempts: Int, interval: Double = 0.05, _ ready: () -> T?) -> T? {
        for attempt in 0..<attempts where !BenchChild.live.interrupted {
            if let value = ready() { return value }
            if attempt + 1 < attempts { usleep(UInt32(interval * 1e6)) }
        }
        return nil
    }

    /// `uname -r`.
    static func kernelRelease() -> String {
        var names = utsname()
        guard uname(&names) == 0 else { return "" }
        return withUnsafeBytes(of: names.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    static func read(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    /// A number as a command-line option: whole numbers without a fraction.
    static func text(_ number: Double) -> String {
        number == number.rounded() && abs(number) < 1e15 ? String(Int(number)) : String(number)
    }

    /// A loopback port no one listens on now (the kernel's choice for a socket bound to port 0).
    static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw LoadError(.failed, "socket() failed") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(socket, pointer, length) == 0 && getsockname(socket, pointer, &length) == 0
            }
        }
        guard bound else { throw LoadError(.failed, "no free loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
