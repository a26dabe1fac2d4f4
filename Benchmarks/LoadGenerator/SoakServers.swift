import APNsSimulator
import EventLoops
import Foundation
import Glibc
import RelayCrypto
import TCPForwarder

/// The processes a soak starts and the faults it injects into them, each stopped by its PID.
extension SoakRun {
    // MARK: - Start-up

    func startServers() throws {
        try BenchSimulator.prepare(files)
        var configuration = SimulatorConfiguration(
            certificatePEM: try String(contentsOfFile: files.certificate, encoding: .utf8),
            privateKeyPEM: try String(contentsOfFile: files.certificateKey, encoding: .utf8),
            teamID: BenchSimulator.teamID, keys: [BenchSimulator.keyID: try BenchSimulator.privateKey(files).publicKey],
            topics: [BenchSimulator.topic])
        configuration.retainedDeliveries = 0
        configuration.tokenFaults = [TokenFault(prefix: Self.deadPrefix, fault: .status(410, reason: "Unregistered"))]
        configuration.goawayReason = "Shutdown"
        configuration.onDeliver = { [self] notification in
            let now = MonotonicClock.now()
            deliveries.withLock { $0.append((notification.apnsID, notification.collapseID ?? "", now)) }
        }
        let simulator = try APNsSimulator(configuration: configuration)
        self.simulator = simulator
        let forwarder = try DelayingForwarder(to: "127.0.0.1", port: simulator.port, delay: .microseconds(500))
        self.forwarder = forwarder
        if options.proxy {
            proxyPort = try BenchRun.freePort()
            try startProxy()
        }
        try startRedis()
        keys = [
            (1, Base64.urlEncode(SecureRandom.bytes(count: 32))), (2, Base64.urlEncode(SecureRandom.bytes(count: 32))),
        ]
        relayPorts = [try BenchRun.freePort(), try BenchRun.freePort()]
        metricsPorts = [try BenchRun.freePort(), try BenchRun.freePort()]
        try writeKeys()
        for relay in 0..<2 { try startRelay(relay) }
    }

    func startProxy() throws {
        let directory = work + "/proxy"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let configuration = """
            Port \(proxyPort)
            Listen 127.0.0.1
            Allow 127.0.0.1
            Timeout 600
            MaxClients 512
            LogFile "\(directory)/tinyproxy.log"
            LogLevel Connect
            PidFile "\(directory)/tinyproxy.pid"

            """
        try configuration.write(toFile: directory + "/tinyproxy.conf", atomically: true, encoding: .utf8)
        proxy = try BenchChild(
            "tinyproxy", ["-d", "-c", directory + "/tinyproxy.conf"], output: .file(directory + "/stdout.log"),
            error: .output)
        guard BenchRun.poll(100, { Self.accepts(self.proxyPort) ? true : nil }) == true else {
            throw LoadError(.failed, "tinyproxy did not start")
        }
    }

    static func accepts(_ port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// A primary, a replica of it, and three sentinels watching them; returns once every sentinel knows the replica.
    func startRedis() throws {
        redisPorts = [try BenchRun.freePort(), try BenchRun.freePort()]
        try startRedisServer(port: redisPorts[0], replicaOf: nil)
        try startRedisServer(port: redisPorts[1], replicaOf: redisPorts[0])
        for index in 0..<3 {
            let port = try BenchRun.freePort()
            let directory = work + "/sentinel-\(index)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            // A quorum of two of the three, as docs/operations/several-instances.md says for three sentinels: with
            // one, a single sentinel that briefly lost sight of a just-promoted primary failed over again, to the
            // old primary that had just come back empty as its replica, and every shared window was lost with it.
            // A primary is called down after 3 s without an answer: on this loaded machine a just-promoted primary
            // went a second without answering, and all three sentinels failed over to that empty replica.
            let configuration =
                [
                    "port \(port)", "bind 127.0.0.1", "dir \(directory)", "daemonize no",
                    "logfile \(directory)/sentinel.log",
                    "sentinel monitor \(Self.master) 127.0.0.1 \(redisPorts[0]) 2",
                    "sentinel auth-pass \(Self.master) \(password)",
                    "sentinel down-after-milliseconds \(Self.master) 3000",
                    "sentinel failover-timeout \(Self.master) 5000",
                ].joined(separator: "\n") + "\n"
            try configuration.write(toFile: directory + "/sentinel.conf", atomically: true, encoding: .utf8)
            sentinels.append(try BenchChild("redis-sentinel", [directory + "/sentinel.conf"], output: .discard))
            sentinelPorts.append(port)
        }
        guard BenchRun.poll(600, { self.replicaKnown() ? true : nil }) == true else {
            throw LoadError(.failed, "the sentinels did not see the replica")
        }
    }

    func startRedisServer(port: Int, replicaOf primary: Int?) throws {
        let directory = work + "/redis-\(port)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var arguments = [
            "--bind", "127.0.0.1", "--port", String(port), "--save", "", "--appendonly", "no", "--requirepass",
            password, "--masterauth", password, "--dir", directory, "--daemonize", "no", "--loglevel", "warning",
        ]
        if let primary { arguments += ["--replicaof", "127.0.0.1", String(primary)] }
        let server = try BenchChild("redis-server", arguments, output: .file(directory + "/redis.log"), error: .output)
        redis[port] = server
        guard BenchRun.poll(200, { self.redisCommand(port, ["PING"])?.contains("PONG") == true ? true : nil }) == true
        else { throw LoadError(.failed, "redis-server did not start on port \(port)") }
    }

    func redisCommand(_ port: Int, _ arguments: [String]) -> String? {
        BenchChild.output(
            "redis-cli", ["-p", String(port)] + arguments, environment: ["REDISCLI_AUTH": password], error: .discard)
    }

    func sentinelCommand(_ index: Int, _ arguments: [String]) -> String? {
        BenchChild.output("redis-cli", ["-p", String(sentinelPorts[index])] + arguments, error: .discard)
    }

    /// The primary's port as the first sentinel that answers gives it.
    func primaryPort() -> Int? {
        for index in sentinelPorts.indices {
            if let answer = sentinelCommand(index, ["SENTINEL", "get-master-addr-by-name", Self.master]),
                let port = answer.split(separator: "\n").last.flatMap({ Int($0) })
            {
                return port
            }
        }
        return nil
    }

    /// Whether every sentinel sees a replica that is up and linked to the primary.
    func replicaKnown() -> Bool {
        sentinelPorts.indices.allSatisfy { index in
            guard let answer = sentinelCommand(index, ["SENTINEL", "replicas", Self.master]) else { return false }
            let lines = answer.split(separator: "\n")
            let flagsOK = zip(lines, lines.dropFirst()).contains { $0 == "flags" && $1 == "slave" }
            let linkOK = zip(lines, lines.dropFirst()).contains { $0 == "master-link-status" && $1 == "ok" }
            return flagsOK && linkOK
        }
    }

    // MARK: - The relays

    func writeKeys() throws {
        let members = keys.map { "\(JSONText.string(String($0.id))):\(JSONText.string($0.key))" }
        try ("{" + members.joined(separator: ",") + "}").write(
            toFile: work + "/relay-keys.json", atomically: true, encoding: .utf8)
        for relay in 0..<2 {
            try relayConfiguration(relay).write(
                toFile: work + "/relay-\(relay).json", atomically: true, encoding: .utf8)
        }
    }

    func relayConfiguration(_ relay: Int) -> String {
        let nodes = sentinelPorts.map { JSONText.string("127.0.0.1:\($0)") }.joined(separator: ", ")
        let forwarderOrigin = JSONText.string("https://127.0.0.1:\(forwarder!.port)")
        let proxyLine = options.proxy ? "    \"proxy\": \(JSONText.string("http://127.0.0.1:\(proxyPort)")),\n" : ""
        return """
            {
              "listen": "127.0.0.1:\(relayPorts[relay])",
              "metrics_listen": "127.0.0.1:\(metricsPorts[relay])",
              "grant_key_id": \(keys.last!.id),
              "push_limit": { "requests": \(Self.phoneLimit), "period_s": \(Int(Self.phonePeriod)) },
              "ip_limit": { "requests": 1000000, "period_s": 1, "block_s": 1 },
              "limits_store": {
                "kind": "redis",
                "sentinel": { "master": \(JSONText.string(Self.master)), "nodes": [\(nodes)] },
                "timeout_ms": 250,
                "on_failure": "local"
              },
              "apns": {
            \(proxyLine)    "topic": \(JSONText.string(BenchSimulator.topic)),
                "sandbox_origin": \(forwarderOrigin),
                "production_origin": \(forwarderOrigin),
                "ca_file": \(JSONText.string(files.caCertificate)),
                "timeout_ms": \(Self.apnsTimeoutMilliseconds)
              },
              "server": { "connection_timeout_s": 60, "shutdown_grace_s": 5 }
            }

            """
    }

    func startRelay(_ relay: Int) throws {
        let incarnation = relayLogs[relay].count
        let log = work + "/relay-\(relay)-\(incarnation + 1).log"
        relayLogs[relay].append(log)
        let environment = [
            "RELAY_KEYS_FILE": work + "/relay-keys.json", "REDIS_PASSWORD": password,
            "APNS_TEAM_ID": BenchSimulator.teamID, "APNS_KEY_ID_SANDBOX": BenchSimulator.keyID,
            "APNS_KEY_SANDBOX": BenchRun.read(files.apnsKey).trimmingCharacters(in: .newlines),
        ]
        let child = try BenchChild(
            options.relayBinary, ["serve", "--config", work + "/relay-\(relay).json"], environment: environment,
            output: .file(log + ".out"), error: .file(log))
        relays[relay] = child
        let port = relayPorts[relay]
        guard BenchRun.poll(600, { SoakHTTP.get(port: port, path: "/healthz")?.status == 200 ? true : nil }) == true
        else {
            LoadCommand.write(BenchRun.read(log), to: STDERR_FILENO)
            throw LoadError(.failed, "relay \(relay) did not start")
        }
        watched.withLock { $0[relay] = (child.pid, incarnation) }
    }

    func stopRelay(_ relay: Int) {
        watched.withLock { $0[relay] = nil }
        relays[relay]?.stop()
        relays[relay] = nil
    }

    func reloads(_ relay: Int) -> Int {
        relayLogs[relay].last.map { BenchRun.read($0).components(separatedBy: "reloaded:").count - 1 } ?? 0
    }

    // MARK: - Faults

    func inject(_ entry: SoakSchedule.Entry, channels: LoopBound<SoakChannels>) throws {
        switch entry.fault {
        case .redisPrimaryKill:
            guard BenchRun.poll(300, interval: 0.1, { self.replicaKnown() ? true : nil }) == true,
                let primary = primaryPort(), let server = redis[primary],
                let replica = redisPorts.first(where: { $0 != primary })
            else { throw LoadError(.failed, "no replica known to every sentinel: the primary is left alive") }
            server.stop(SIGKILL)
            redis[primary] = nil
            guard BenchRun.poll(300, interval: 0.1, { self.primaryPort() == replica ? true : nil }) == true else {
                throw LoadError(.failed, "the sentinels did not promote the replica within 30 s")
            }
            try startRedisServer(port: primary, replicaOf: replica)
        case .redisReplicaRestart:
            guard let primary = primaryPort(), let replica = redisPorts.first(where: { $0 != primary }) else {
                throw LoadError(.failed, "no primary known")
            }
            redis[replica]?.stop()
            redis[replica] = nil
            try startRedisServer(port: replica, replicaOf: primary)
        case .apnsGoawayBurst: simulator?.inject(.goaway, count: 5)
        case .apnsConnectionReset: simulator?.inject(.resetConnection, count: 1)
        case .apnsStall: simulator?.inject(.stall, count: 3)
        case .linkReset: forwarder?.resetAll()
        case .linkStall: forwarder?.forgetAll()
        case .providerTokenRejected: simulator?.inject(.status(403, reason: "ExpiredProviderToken"), count: 1)
        case .relayKeyRotation:
            let before = (0..<2).map(reloads)
            let id = keys.last!.id + 1
            keys.append((id, Base64.urlEncode(SecureRandom.bytes(count: 32))))
            // The first key stays (the address limiter's shared key comes from the lowest id); the previous grant key
            // is retired at once, so every grant sealed with it is refused (401) and the channels renew it.
            keys = [keys[0], keys[keys.count - 1]]
            try writeKeys()
            for relay in 0..<2 { if let pid = relays[relay]?.pid { kill(pid, SIGHUP) } }
            guard
                BenchRun.poll(100, interval: 0.1, { (0..<2).allSatisfy { self.reloads($0) > before[$0] } ? true : nil })
                    == true
            else { throw LoadError(.failed, "a relay did not say it reloaded") }
        case .relayRollingRestart:
            let relay = entry.relay
            _ = channels.loop.execute { channels.value.setInRotation(relay, false) }
            // In-flight requests are answered by the draining relay; new ones go to the other.
            usleep(100_000)
            stopRelay(relay)
            try startRelay(relay)
            _ = channels.loop.execute { channels.value.setInRotation(relay, true) }
        case .proxyRestart:
            proxy?.stop()
            proxy = nil
            try startProxy()
        }
    }

    // MARK: - Clean-up

    func cleanUp() {
        for relay in relays.indices { stopRelay(relay) }
        for sentinel in sentinels { sentinel.stop(SIGKILL) }
        for server in redis.values { server.stop(SIGKILL) }
        proxy?.stop()
        forwarder?.stop()
        simulator?.stop()
        if let keep = options.keep {
            do { try FileManager.default.copyItem(atPath: work, toPath: keep) } catch {
                Self.log("could not keep the run's files in \(keep): \(error)")
            }
        }
        try? FileManager.default.removeItem(atPath: work)
    }
}
