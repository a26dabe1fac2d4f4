import Foundation
import Glibc
import RelayCore
import RelayCrypto

/// `bench`: one benchmark run (scripts/bench drives it; BENCHMARKS.md explains every figure). It starts the
/// servers on free loopback ports (the APNs simulator, the relay, redis-server, nginx, the delaying forwarder)
/// and stops them by PID, runs this binary's measurements as child processes (each prints one JSON object,
/// recorded as a step in results.jsonl), then prints the report: a table of the figures against their targets
/// and, last, one JSON line. A figure that could not be measured is null and the run exits 1 (smoke runs too).
final class BenchRun {
    struct Options {
        var plan: BenchPlan
        /// The build the binaries come from, for the header line.
        var configuration: String
        var relayBinary: String
        var targets: String
        var perfByLibrary: String
        /// Where to copy the run's files (every step's JSON, the servers' logs and configurations) at its end.
        var keep: String?
        var verbose = false
        var perf = false
        var relayThreads: Int?

        init(_ arguments: Arguments) throws(LoadError) {
            let modeName = arguments.string("mode", default: "full")
            guard let mode = BenchPlan.Mode(rawValue: modeName) else {
                throw LoadError(.usage, "--mode must be full, smoke, cpu, redis, token or tls")
            }
            plan = BenchPlan(
                mode: mode, hopMilliseconds: try arguments.number("hop-ms", default: 0.5),
                saturationConnections: try arguments.integer("connections", default: 64))
            guard plan.saturationConnections > 0, plan.hopMilliseconds >= 0 else {
                throw LoadError(.usage, "--connections must be positive and --hop-ms not negative")
            }
            configuration = arguments.string("configuration", default: "debug")
            relayBinary = try arguments.string("relay-bin")
            targets = arguments.string("targets", default: "scripts/bench-targets.json")
            perfByLibrary = arguments.string("perf-by-library", default: "scripts/perf-by-library")
            keep = arguments.all("keep").last.flatMap { $0.isEmpty ? nil : $0 }
            // As the environment's BENCH_VERBOSE and BENCH_PERF: any value but an empty one.
            verbose = !arguments.string("verbose", default: "").isEmpty
            perf = !arguments.string("perf", default: "").isEmpty
            let threads = arguments.string("relay-threads", default: "")
            if !threads.isEmpty {
                guard let count = Int(threads), count > 0 else {
                    throw LoadError(.usage, "--relay-threads must be a positive integer")
                }
                relayThreads = count
            }
        }
    }

    let options: Options
    var plan: BenchPlan { options.plan }
    /// This binary: every measurement runs in a process of its own.
    let load: String
    let work: String
    let apns: BenchSimulator.Files
    var results: String { work + "/results.jsonl" }
    var bodies: String { work + "/bodies.txt" }
    var relayKeys = ""
    let redisPassword = Hex.encode(SecureRandom.bytes(count: 18))

    var simulator: BenchChild?
    var relay: BenchChild?
    var simulatorPort = 0
    var relayTarget = ""
    /// The limits store for the next `startStack`: nil (memory) or the port of a Redis to count in.
    var storePort: Int?
    /// Whether the relay of the next `startStack` serves HTTPS itself (`tls`, with the pair in `front`).
    var servesTLS = false
    var redis: BenchChild?
    var redisPort = 0
    var forwarder: BenchChild?
    var nginx: [BenchChild] = []
    var nginxPort = 0
    var nginxWorker: Int32 = 0
    /// What the provider-token runs change in the next `startStack`'s relay configuration and environment (nil: the
    /// other runs' relay, its key from a file).
    var relaySetup: ((inout String, inout [String: String]) throws -> Void)?

    static func run(_ arguments: Arguments) throws -> Int32 {
        let options = try Options(arguments)
        let (load, work) = try BenchChild.prepareRun("duo-relay-bench")
        let bench = BenchRun(options: options, load: load, work: work)
        defer { bench.cleanUp() }
        var status: Int32 = 1
        do {
            status = try bench.measure()
        } catch let error as LoadError {
            // (Once interrupted, the error is the interruption's own.)
            if !BenchChild.live.interrupted { log(error.reason) }
        }
        guard !BenchChild.live.interrupted else {
            log("interrupted")
            return 130
        }
        return status
    }

    private init(options: Options, load: String, work: String) {
        self.options = options
        self.load = load
        self.work = work
        apns = .init(directory: work + "/apns")
    }

    static func log(_ line: String) { LoadCommand.write("bench: " + line, to: STDERR_FILENO) }

    // MARK: - The run

    func measure() throws -> Int32 {
        guard FileManager.default.createFile(atPath: results, contents: nil) else {
            throw LoadError(.failed, "cannot write \(results)")
        }
        try BenchSimulator.prepare(apns)
        guard let keys = BenchChild.output(options.relayBinary, ["keygen", "--id", "1"]) else {
            throw LoadError(.failed, "\(options.relayBinary) keygen failed")
        }
        relayKeys = keys.trimmingCharacters(in: .whitespacesAndNewlines)
        let machine = BenchReadings.machine(
            cores: ProcessInfo.processInfo.activeProcessorCount, cpuinfo: Self.read("/proc/cpuinfo"),
            kernel: Self.kernelRelease())
        let load = Self.read("/proc/loadavg").split(separator: " ").prefix(3).joined(separator: " ")
        Self.log("\(plan.mode.rawValue) run (\(options.configuration) build) on \(machine); load average \(load)")
        let started = Date()

        // Grants for the pushes, one per device token.
        try startStack()
        try loadRun(["mint", "--target", relayTarget, "--count", String(plan.tokens), "--out", bodies])
        try loadRun(["grant-bodies", "--count", "1024", "--out", work + "/grant-bodies.txt"])
        Self.log("minted \(plan.tokens) grants, one per device token")
        if plan.measuresSaturation { try saturation() }
        stopStack()
        if plan.measuresServing { try serving() }
        if plan.measuresAnchor { try anchor() }
        if options.perf, plan.measuresAnchor, BenchChild.find("perf") != nil { try perfPass() }
        if plan.measuresRedis { try redisStore() }
        if plan.measuresTokenRefresh { try tokenRefresh() }
        if plan.measuresTLS { try tlsFront() }
        Self.log("done in \(Int(Date().timeIntervalSince(started))) s")

        LoadCommand.write("")
        LoadCommand.write("duo-relay benchmark (\(plan.mode.rawValue), \(options.configuration) build) on \(machine)")
        return try BenchReport.run(
            try Arguments(["--results", results, "--targets", options.targets, "--mode", plan.mode.rawValue]))
    }

    /// Push throughput at saturation (closed loop), alternating with the same APNs requests sent straight to the
    /// simulator by h2load (same simulator process, same requests in flight).
    func saturation() throws {
        for round in 1...plan.rounds {
            record("saturation", saturated(watching: relayAndSimulator))
            record(
                "direct",
                [
                    "direct", "--dir", apns.directory, "--port", String(simulatorPort), "--seconds",
                    Self.text(plan.directSeconds), "--warmup", Self.text(plan.warmupSeconds), "--connections", "2",
                    "--streams", String(plan.directStreams),
                ] + Self.pids(["simulator": simulatorPID]))
            Self.log("round \(round) of \(plan.rounds) done")
        }
    }

    /// Cost against concurrency, latency at a fixed rate, grants and idle keep-alive connections: each on a
    /// fresh stack, so that no run inherits another's connections or warmed-up state.
    func serving() throws {
        for connections in plan.concurrencyLevels {
            try onAFreshStack("concurrency") {
                closedLoop(connections, seconds: plan.levelSeconds, warmup: 1, watching: relayAndSimulator)
            }
        }
        try onAFreshStack("latency") { latency() }
        try onAFreshStack("grant") {
            closedLoop(
                plan.saturationConnections, seconds: plan.grantSeconds, warmup: 1, watching: ["relay": relayPID],
                bodies: work + "/grant-bodies.txt", path: "/v1/grant")
        }
        try onAFreshStack("idle") {
            [
                "idle", "--target", relayTarget, "--connections", String(plan.idleConnections), "--pid",
                String(relayPID), "--settle", Self.text(plan.idleSettleSeconds),
            ]
        }
        Self.log("saturation, concurrency, latency, grants and idle connections measured")
    }

    /// The relay beside nginx at fixed rates, each relay run on a fresh stack (the first also counts the threads
    /// the relay starts once serving); then the system calls per push at 1,000/s in a pass of their own (strace
    /// slows the relay), and on the same stack the simulator's.
    func anchor() throws {
        try startNginx()
        for rate in plan.rates {
            let seconds = plan.seconds(atRate: rate)
            try onAFreshStack("rate-relay") { openLoop(Double(rate), seconds: seconds, watching: relayAndSimulator) }
            record(
                "rate-nginx",
                openLoop(
                    Double(rate), seconds: seconds, watching: ["nginx": nginxWorker],
                    target: "127.0.0.1:\(nginxPort)"))
        }
        stopNginx()
        Self.log("relay and nginx at \(plan.rates.map(String.init).joined(separator: " ")) per second measured")
        try startStack()
        for (step, pid) in [("syscalls", relayPID), ("syscalls-simulator", simulatorPID)] {
            record(
                step,
                [
                    "syscalls", "--pid", String(pid), "--target", relayTarget, "--bodies", bodies, "--rate",
                    String(plan.fixedRate), "--seconds", Self.text(plan.syscallsSeconds), "--warmup",
                    Self.text(plan.latencyWarmupSeconds), "--connections", "64",
                ])
        }
        stopStack()
    }

    /// The Redis store against memory, in alternating rounds each on a fresh stack (memory, Redis, memory, ...),
    /// so that a slower stretch of the machine moves one pair of samples rather than one store's figures (the
    /// targets are ratios); then Redis one network hop away.
    func redisStore() throws {
        try startRedis()
        let before = redisInfo()
        for _ in 1...plan.rounds {
            storePort = nil
            try onAFreshStack("pair-memory") { saturated(watching: ["relay": relayPID]) }
            storePort = redisPort
            try startStack()
            record("pair-redis", saturated(watching: ["relay": relayPID, "redis": redis?.pid ?? 0]))
            let relayLog = Self.read(work + "/relay.log")
            guard relayLog.contains("limits store: connected") else {
                LoadCommand.write(relayLog, to: STDERR_FILENO)
                throw LoadError(.failed, "the relay did not reach Redis")
            }
            if relayLog.contains("limits store: lost") {
                Self.log("warning: the relay lost Redis during the run (see BENCHMARKS.md, \"How a run works\")")
            }
            stopStack()
        }
        if let sharing = RedisInfo.sharing(before: before, after: redisInfo()) { Self.log(sharing) }
        storePort = redisPort
        try onAFreshStack("latency-redis") { latency() }
        for _ in 1...plan.rounds {
            for (step, port) in [("fixed-memory", nil), ("fixed-redis", redisPort)] {
                storePort = port
                try onAFreshStack(step) {
                    openLoop(Double(plan.fixedRate), seconds: plan.fixedSeconds, watching: ["relay": relayPID])
                }
            }
        }
        Self.log("redis store measured")

        // Every chunk delayed by hop_ms each way.
        let portFile = work + "/forwarder.port"
        try? FileManager.default.removeItem(atPath: portFile)
        forwarder = try BenchChild(
            load,
            [
                "forwarder", "--to", "127.0.0.1:\(redisPort)", "--delay-ms", Self.text(plan.hopMilliseconds),
                "--port-file", portFile,
            ])
        guard let hopPort = Self.poll(100, { Int(Self.read(portFile).trimmingCharacters(in: .whitespaces)) }) else {
            throw LoadError(.failed, "the forwarder did not start")
        }
        storePort = hopPort
        try onAFreshStack("hop-saturation") { saturated(watching: ["relay": relayPID]) }
        try onAFreshStack("hop-latency") { latency() }
        forwarder?.stop()
        forwarder = nil
        storePort = nil
        redis?.stop(SIGKILL)
        redis = nil
    }

    // MARK: - Measurements

    var relayPID: Int32 { relay?.pid ?? 0 }
    var simulatorPID: Int32 { simulator?.pid ?? 0 }
    var relayAndSimulator: KeyValuePairs<String, Int32> { ["relay": relayPID, "simulator": simulatorPID] }

    static func pids(_ watched: KeyValuePairs<String, Int32>) -> [String] {
        watched.flatMap { ["--pid", "\($0.key)=\($0.value)"] }
    }

    /// The saturation run's load: the plan's connections, seconds and warm-up.
    func saturated(watching: KeyValuePairs<String, Int32>) -> [String] {
        closedLoop(
            plan.saturationConnections, seconds: plan.saturationSeconds, warmup: plan.warmupSeconds, watching: watching)
    }

    /// The latency run's load: the plan's fixed rate and seconds, the relay's CPU watched.
    func latency() -> [String] {
        openLoop(plan.latencyRate, seconds: plan.latencySeconds, watching: ["relay": relayPID])
    }

    func closedLoop(
        _ connections: Int, seconds: Double, warmup: Double, watching: KeyValuePairs<String, Int32> = [:],
        bodies: String? = nil, path: String? = nil
    ) -> [String] {
        [
            "closed-loop", "--target", relayTarget, "--bodies", bodies ?? self.bodies, "--connections",
            String(connections), "--seconds", Self.text(seconds), "--warmup", Self.text(warmup),
        ] + (path.map { ["--path", $0] } ?? []) + Self.pids(watching)
    }

    func openLoop(
        _ rate: Double, seconds: Double, warmup: Double? = nil, watching: KeyValuePairs<String, Int32> = [:],
        target: String? = nil
    ) -> [String] {
        [
            "open-loop", "--target", target ?? relayTarget, "--bodies", bodies, "--rate", Self.text(rate),
            "--seconds", Self.text(seconds), "--warmup", Self.text(warmup ?? plan.latencyWarmupSeconds),
            "--connections", "64",
        ] + Self.pids(watching)
    }

    /// Starts a fresh stack, records `step` with the load `arguments` gives (read once the stack is up: it names
    /// the new processes), and stops the stack.
    func onAFreshStack(_ step: String, _ arguments: () -> [String]) throws {
        try startStack()
        record(step, arguments())
        stopStack()
    }

    /// Runs a measurement and records its JSON as `step`; one that printed nothing is left out, which leaves
    /// its figures null.
    func record(_ step: String, _ arguments: [String]) {
        appendResult(step, BenchChild.output(load, arguments) ?? "")
    }

    /// Appends a step's JSON, read from what it printed, to the results (nothing when it printed none: its figures
    /// are null).
    func appendResult(_ step: String, _ output: String) {
        guard !BenchChild.live.interrupted else { return }
        guard let line = BenchReadings.resultLine(step: step, output: output) else {
            Self.log("\(step): no result (its figures will be null)")
            return
        }
        if let handle = FileHandle(forWritingAtPath: results) {
            handle.seekToEndOfFile()
            handle.write(Data((line + "\n").utf8))
            handle.closeFile()
        }
        if options.verbose { Self.log("\(step): \(line)") }
    }

    /// Runs one of this binary's commands that must succeed.
    func loadRun(_ arguments: [String]) throws {
        guard BenchChild.output(load, arguments) != nil else {
            throw LoadError(.failed, "duo-relay-load \(arguments[0]) failed")
        }
    }

    // MARK: - perf (BENCH_PERF=1)

    /// Where the CPU goes, by library, in µs per request (BENCHMARKS.md, "Where the CPU goes"): the relay beside
    /// nginx at 1,000/s, then the relay beside the simulator behind it at saturation; printed, and kept with
    /// BENCH_KEEP (with the relay's by-function table). Each pass gets a second of warm-up load; perf then takes
    /// one sample per 200 µs of each program's CPU while the measured load runs (and a second after, so that no
    /// request's work is cut off).
    func perfPass() throws {
        try startStack()
        try perfFixed("relay", pid: relayPID, target: relayTarget)
        stopStack()
        try startNginx()
        try perfFixed("nginx", pid: nginxWorker, target: "127.0.0.1:\(nginxPort)")
        stopNginx()
        try startStack()
        _ = BenchChild.output(
            load, closedLoop(plan.saturationConnections, seconds: 1, warmup: 0), error: .discard)
        let recorders = [
            try perfStart("relay-saturated", pid: relayPID), try perfStart("simulator-saturated", pid: simulatorPID),
        ]
        let saturated = BenchChild.output(
            load, closedLoop(plan.saturationConnections, seconds: plan.fixedSeconds, warmup: 0))
        try (saturated ?? "").write(toFile: work + "/saturated-load.json", atomically: true, encoding: .utf8)
        for recorder in recorders { recorder.wait() }
        stopStack()
        let symbols = BenchChild.output(
            "perf",
            ["report", "-i", work + "/relay.perf", "--no-children", "--sort", "dso,sym", "--stdio", "-g", "none"],
            error: .discard)
        try BenchReadings.perfSymbols(symbols ?? "").write(
            toFile: work + "/perf-symbols.txt", atomically: true, encoding: .utf8)
        func requests(_ file: String) -> String {
            BenchReadings.answeredRequests(Self.read(work + "/" + file)).map(String.init) ?? ""
        }
        Self.log("CPU by library at \(plan.fixedRate)/s, the relay beside nginx (perf):")
        perfByLibrary([
            "relay=\(work)/relay.perf:\(requests("relay-load.json"))",
            "nginx=\(work)/nginx.perf:\(requests("nginx-load.json"))",
        ])
        Self.log("CPU by library at saturation, the relay beside the simulator behind it (perf):")
        let saturatedRequests = requests("saturated-load.json")
        perfByLibrary([
            "relay=\(work)/relay-saturated.perf:\(saturatedRequests)",
            "simulator=\(work)/simulator-saturated.perf:\(saturatedRequests)",
        ])
    }

    /// Records `pid` into NAME.perf, in the background, for the measured load's seconds and one more.
    func perfStart(_ name: String, pid: Int32) throws -> BenchChild {
        let recorder = try BenchChild(
            "perf",
            [
                "record", "-q", "-e", "cpu-clock", "-c", "200000", "-p", String(pid), "-o", "\(work)/\(name).perf",
                "--", "sleep", Self.text(plan.fixedSeconds + 1),
            ], output: .discard, error: .discard)
        // A deliberate pace: perf says nothing when it has attached; a fifth of a second lets it before the load.
        usleep(200_000)
        return recorder
    }

    /// `pid` recorded while `target` serves the fixed rate.
    func perfFixed(_ name: String, pid: Int32, target: String) throws {
        var warmup = openLoop(Double(plan.fixedRate), seconds: 1, warmup: 0, target: target)
        _ = BenchChild.output(load, warmup, error: .discard)
        let recorder = try perfStart(name, pid: pid)
        warmup = openLoop(Double(plan.fixedRate), seconds: plan.fixedSeconds, warmup: 0, target: target)
        try (BenchChild.output(load, warmup) ?? "").write(
            toFile: "\(work)/\(name)-load.json", atomically: true, encoding: .utf8)
        recorder.wait()
    }

    func perfByLibrary(_ arguments: [String]) {
        let table = try? BenchChild(options.perfByLibrary, ["200"] + arguments)
        if table?.wait() != 0 { Self.log("perf could not be read") }
    }
}
