import Foundation

/// `report`: the benchmark's figures, made from the JSON line of every step `scripts/bench` ran
/// (one `{"step": NAME, "data": OBJECT}` per line, OBJECT being a subcommand's output), checked
/// against the targets file, printed as a table and then as one JSON line. A figure whose runs are
/// missing or went wrong (fewer than 99 % of their requests answered 200) is null, and a null
/// figure makes the report exit 1.
struct BenchReport {
    struct Step {
        let name: String
        let data: [String: Any]
    }

    /// One figure: its JSON key (or a name for the table only), how it reads, and its value.
    struct Figure {
        let key: String
        let label: String
        let digits: Int
        let inJSON: Bool
        let value: Double?
    }

    /// A target from the targets file: `at_least` or `at_most` a number, or that number times another
    /// figure of the same run (`times`).
    struct Target {
        let figure: String
        let atLeast: Bool
        let bound: Double
        let times: String?
        let source: String
    }

    static let rates = [200, 1000, 2000, 5000]

    let steps: [Step]

    static func run(_ options: Arguments) throws -> Int32 {
        let mode = options.string("mode", default: "full")
        let lines = try String(contentsOfFile: try options.string("results"), encoding: .utf8).split(separator: "\n")
        var steps: [Step] = []
        for line in lines where !line.isEmpty {
            guard let object = JSONText.object(line), let name = object["step"] as? String,
                let data = object["data"] as? [String: Any]
            else { throw LoadError(.failed, "a results line is not {\"step\":...,\"data\":{...}}: \(line.prefix(80))") }
            steps.append(Step(name: name, data: data))
        }
        let targets = try readTargets(try options.string("targets"))
        let report = BenchReport(steps: steps)
        let figures = report.figures()
        let known = Set(figures.map(\.key))
        for target in targets where !known.contains(target.figure) || !(target.times.map(known.contains) ?? true) {
            throw LoadError(.failed, "the targets file names an unknown figure: \(target.figure)")
        }
        LoadCommand.write(report.table(figures, targets: targets, mode: mode))
        let members = figures.filter(\.inJSON).map { "\(JSONText.string($0.key)):\(format($0.value, $0.digits))" }
        LoadCommand.write("{\"mode\":\(JSONText.string(mode)),\(members.joined(separator: ","))}")
        let missing = figures.filter { $0.inJSON && $0.value == nil }.map(\.key)
        // `scripts/bench --cpu`, `--redis`, `--token` and `--tls` measure a few figures on purpose; the others are null
        // without failing it.
        guard missing.isEmpty || ["cpu", "redis", "token", "tls"].contains(mode) else {
            LoadCommand.write("bench: not measured: \(missing.joined(separator: ", "))", to: STDERR_FILENO)
            return 1
        }
        return 0
    }

    static func readTargets(_ path: String) throws -> [Target] {
        guard let file = JSONText.object(Substring(try String(contentsOfFile: path, encoding: .utf8))),
            let list = file["targets"] as? [[String: Any]]
        else { throw LoadError(.failed, "\(path) is not {\"targets\": [...]}") }
        return try list.map { entry in
            let atLeast = entry["at_least"] as? Double
            let atMost = entry["at_most"] as? Double
            guard let figure = entry["figure"] as? String, (atLeast == nil) != (atMost == nil) else {
                throw LoadError(.failed, "\(path): every target has a figure and one of at_least, at_most")
            }
            return Target(
                figure: figure, atLeast: atLeast != nil, bound: atLeast ?? atMost ?? 0,
                times: entry["times"] as? String,
                source: entry["from"] as? String ?? "")
        }
    }

    // MARK: - Reading the steps

    func runs(_ name: String, rate: Int? = nil) -> [[String: Any]] {
        steps.filter { step in
            step.name == name && (rate.map { Self.number(step.data, "rate") == Double($0) } ?? true)
        }.map(\.data)
    }

    static func number(_ data: [String: Any], _ path: String...) -> Double? {
        var node: Any? = data
        for key in path { node = (node as? [String: Any])?[key] }
        return (node as? NSNumber)?.doubleValue
    }

    /// Whether a run did what it was asked: at least 99 % of what it scheduled (open loop) or of its
    /// answers (closed loop) answered 200; h2load with no failed request; the idle connections all answered.
    static func succeeded(_ data: [String: Any]) -> Bool {
        let ok = number(data, "ok") ?? number(data, "statuses", "200")
        if let scheduled = number(data, "scheduled") {
            return scheduled > 0 && (ok ?? 0) >= 0.99 * scheduled
        }
        if let answers = number(data, "answers") {
            return answers > 0 && (ok ?? 0) >= 0.99 * answers
        }
        if let connections = number(data, "connections"), let answered = number(data, "answered") {
            return answered >= 0.99 * connections
        }
        if let rate = number(data, "rps"), let failed = number(data, "failed") {
            return rate > 0 && failed <= 0.01 * rate * (number(data, "seconds") ?? 1)
        }
        return false
    }

    /// The median of one value over every run of a step; nil if there is none or one went wrong.
    func median(_ name: String, rate: Int? = nil, _ path: String...) -> Double? {
        Self.median(runs(name, rate: rate), path)
    }

    static func median(_ runs: [[String: Any]], _ path: [String]) -> Double? {
        guard !runs.isEmpty, runs.allSatisfy(succeeded) else { return nil }
        var values: [Double] = []
        for run in runs {
            var node: Any? = run
            for key in path { node = (node as? [String: Any])?[key] }
            guard let value = (node as? NSNumber)?.doubleValue else { return nil }
            values.append(value)
        }
        values.sort()
        let middle = values.count / 2
        return values.count % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2
    }

    static func ratio(_ a: Double?, _ b: Double?) -> Double? {
        guard let a, let b, b > 0 else { return nil }
        return a / b
    }

    // MARK: - The figures

    func figures() -> [Figure] {
        var list: [Figure] = []
        func add(_ key: String, _ label: String, _ digits: Int, _ value: Double?, json: Bool = true) {
            list.append(Figure(key: key, label: label, digits: digits, inJSON: json, value: value))
        }
        let pushRPS = median("saturation", "rps")
        let directRPS = median("direct", "rps")
        add("push_rps", "pushes/s through the relay, closed loop, median of rounds", 0, pushRPS)
        add("direct_rps", "h2load straight to the simulator, median of rounds", 0, directRPS)
        add("ratio", "push_rps / direct_rps", 3, Self.ratio(pushRPS, directRPS))
        add("push_cpu_us", "relay CPU per push at saturation", 1, median("saturation", "cpu_us", "relay"))
        add(
            "simulator_cpu_us", "the simulator's CPU per push at saturation, behind the relay", 1,
            median("saturation", "cpu_us", "simulator"), json: false)
        add(
            "direct_simulator_cpu_us", "the simulator's CPU per request under h2load", 1,
            median("direct", "cpu_us", "simulator"), json: false)
        add("p50_ms", "push latency p50, open loop, memory limits", 3, median("latency", "p50_ms"))
        add("p99_ms", "push latency p99, open loop, memory limits", 3, median("latency", "p99_ms"))
        let peaks = steps.compactMap { Self.number($0.data, "hwm_kb", "relay") }
        add("rss_mb", "relay peak RSS over the push, grant and fixed-rate runs", 1, peaks.max().map { $0 / 1024 })
        add(
            "idle_conn_rss_mb", "relay RSS holding the idle keep-alive connections", 1,
            median("idle", "rss_kb").map { $0 / 1024 })
        add("grant_rps", "grants/s, closed loop", 0, median("grant", "rps"))
        add("grant_cpu_us", "relay CPU per grant", 1, median("grant", "cpu_us", "relay"))
        let redisRPS = median("pair-redis", "rps")
        let memoryRPS = median("pair-memory", "rps")
        let redisCPU = median("pair-redis", "cpu_us", "relay")
        let memoryCPU = median("pair-memory", "cpu_us", "relay")
        add("push_rps_redis", "pushes/s with limits_store redis, closed loop", 0, redisRPS)
        add("push_cpu_us_redis", "relay CPU per push with redis, saturated", 1, redisCPU)
        add("push_rps_memory_paired", "pushes/s in memory, in the same pairs of rounds", 0, memoryRPS)
        add("push_cpu_us_memory_paired", "relay CPU per push in memory, same pairs", 1, memoryCPU)
        add("redis_rps_ratio", "push_rps_redis / push_rps_memory_paired", 2, Self.ratio(redisRPS, memoryRPS))
        add("redis_cpu_ratio", "push_cpu_us_redis / push_cpu_us_memory_paired", 2, Self.ratio(redisCPU, memoryCPU))
        add("redis_cpu_us", "redis-server's CPU per push", 1, median("pair-redis", "cpu_us", "redis"))
        add("p99_ms_redis", "push latency p99 with redis, open loop", 3, median("latency-redis", "p99_ms"))
        let memoryAt1000 = Self.median(
            runs("fixed-memory", rate: 1000) + runs("rate-relay", rate: 1000), ["cpu_us", "relay"])
        let redisAt1000 = median("fixed-redis", rate: 1000, "cpu_us", "relay")
        add("push_cpu_us_at_1000", "relay CPU per push at 1,000/s, memory limits", 1, memoryAt1000)
        // The relay's CPU at 1,000/s over the simulator's in the same run: both move with the machine (in one --cpu
        // run the relay spent 96 to 159 µs a push, the unchanged simulator 76 to 126), their ratio far less (1.18
        // to 1.31 there). The figure to compare two builds by.
        let paired: [[String: Any]] = runs("rate-relay", rate: 1000).map { run in
            var run = run
            run["relay_over_simulator"] = Self.ratio(
                Self.number(run, "cpu_us", "relay"), Self.number(run, "cpu_us", "simulator")
            ).map { NSNumber(value: $0) }
            return run
        }
        add(
            "relay_over_simulator_at_1000",
            "relay CPU per push over the simulator's, the same runs at 1,000/s (the steadiest CPU figure)", 2,
            Self.median(paired, ["relay_over_simulator"]), json: false)
        add("push_cpu_us_redis_at_1000", "relay CPU per push at 1,000/s, redis", 1, redisAt1000)
        add(
            "redis_cpu_ratio_at_1000", "push_cpu_us_redis_at_1000 / push_cpu_us_at_1000", 2,
            Self.ratio(redisAt1000, memoryAt1000))
        add("push_rps_redis_hop", "pushes/s with redis one delayed hop away", 0, median("hop-saturation", "rps"))
        add("p99_ms_redis_hop", "push latency p99 with redis one delayed hop away", 3, median("hop-latency", "p99_ms"))
        for rate in Self.rates {
            let relay = rate == 1000 ? memoryAt1000 : median("rate-relay", rate: rate, "cpu_us", "relay")
            let nginx = median("rate-nginx", rate: rate, "cpu_us", "nginx")
            if rate != 1000 {
                add("push_cpu_us_at_\(rate)", "relay CPU per push at \(rate)/s, memory limits", 1, relay)
            }
            add("nginx_cpu_us_at_\(rate)", "nginx's CPU per proxied request at \(rate)/s", 1, nginx)
            add(
                "cpu_ratio_to_nginx_at_\(rate)", "push_cpu_us_at_\(rate) / nginx_cpu_us_at_\(rate)", 2,
                Self.ratio(relay, nginx))
        }
        add(
            "syscalls_per_push_at_1000", "relay system calls per push at 1,000/s (strace -c -f)", 2,
            median("syscalls", "syscalls_per_push"))
        add(
            "wakeups_per_push_at_1000", "epoll_wait and poll returns per push at 1,000/s", 2,
            median("syscalls", "wakeups_per_push"))
        add(
            "simulator_syscalls_per_push_at_1000", "the simulator's system calls per push at 1,000/s, behind the relay",
            2, median("syscalls-simulator", "syscalls_per_push"), json: false)
        // Threads the relay started once serving: living new threads over its first run (200/s, on a
        // fresh relay), and every clone during the strace pass; the larger of the two.
        let started = [
            median("rate-relay", rate: 200, "threads_started", "relay"), median("syscalls", "thread_starts"),
        ]
        add(
            "threads_started", "threads the relay started after start-up (first run at 200/s; clones at 1,000/s)", 0,
            started.contains { $0 == nil } ? nil : started.compactMap { $0 }.max())
        list += tokenFigures()
        list += tlsFigures()
        return list
    }

    // MARK: - Printing

    static func format(_ value: Double?, _ digits: Int) -> String { JSONText.number(value, digits: digits) }

    func table(_ figures: [Figure], targets: [Target], mode: String) -> String {
        let values = Dictionary(figures.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
        var lines = [
            "", "| figure | value | target | | what |", "| --- | ---: | --- | --- | --- |",
        ]
        for figure in figures {
            let value = Self.format(figure.value, figure.digits)
            var targetText = ""
            var verdict = ""
            if let target = targets.first(where: { $0.figure == figure.key }) {
                let sign = target.atLeast ? "≥" : "≤"
                var bound: Double? = target.bound
                targetText = "\(sign) \(Self.trimmed(target.bound))"
                if let other = target.times {
                    bound = values[other].flatMap { $0 }.map { $0 * target.bound }
                    targetText =
                        "\(sign) \(Self.trimmed(target.bound)) × \(other) (\(Self.format(bound, figure.digits)))"
                }
                if let actual = figure.value, let bound {
                    verdict = (target.atLeast ? actual >= bound : actual <= bound) ? "met" : "not met"
                } else {
                    verdict = "not measured"
                }
                if !target.source.isEmpty { targetText += ", " + target.source }
            } else if figure.value == nil && figure.inJSON {
                verdict = "not measured"
            }
            let key = figure.inJSON ? "`\(figure.key)`" : "(`\(figure.key)`, table only)"
            lines.append("| \(key) | \(value) | \(targetText) | \(verdict) | \(figure.label) |")
        }
        lines += ["", "Relay and nginx at fixed rates (open loop, 64 connections; CPU µs per request):", ""]
        lines += ["| rate /s | relay µs | nginx µs | relay / nginx | relay p99 ms | nginx p99 ms | simulator µs |"]
        lines += ["| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for rate in Self.rates {
            let relayKey = "push_cpu_us_at_\(rate)"
            let p99Relay = Self.median(runs("rate-relay", rate: rate), ["p99_ms"])
            let p99Nginx = Self.median(runs("rate-nginx", rate: rate), ["p99_ms"])
            let simulator = Self.median(runs("rate-relay", rate: rate), ["cpu_us", "simulator"])
            lines.append(
                "| \(rate) | \(Self.format(values[relayKey].flatMap { $0 }, 1)) "
                    + "| \(Self.format(values["nginx_cpu_us_at_\(rate)"].flatMap { $0 }, 1)) "
                    + "| \(Self.format(values["cpu_ratio_to_nginx_at_\(rate)"].flatMap { $0 }, 2)) "
                    + "| \(Self.format(p99Relay, 3)) | \(Self.format(p99Nginx, 3)) | \(Self.format(simulator, 1)) |")
        }
        lines += ["", "Cost against concurrency (pushes, closed loop):", ""]
        lines += ["| connections | pushes/s | relay CPU µs/push | simulator CPU µs/push | p50 ms | p99 ms | non-200 |"]
        lines += ["| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for run in runs("concurrency") {
            let answers = Self.number(run, "answers") ?? 0
            let ok = Self.number(run, "ok") ?? 0
            let cells = [
                Self.format(Self.number(run, "connections"), 0), Self.format(Self.number(run, "rps"), 0),
                Self.format(Self.number(run, "cpu_us", "relay"), 1),
                Self.format(Self.number(run, "cpu_us", "simulator"), 1), Self.format(Self.number(run, "p50_ms"), 3),
                Self.format(Self.number(run, "p99_ms"), 3), Self.format(answers - ok, 0),
            ]
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        for (step, whose) in [("syscalls", "the relay"), ("syscalls-simulator", "the simulator")] {
            guard let counted = runs(step).first, let calls = counted["calls"] as? [String: Any],
                let answers = Self.number(counted, "answers"), answers > 0
            else { continue }
            let top = calls.compactMap { name, count in (count as? NSNumber).map { (name, $0.doubleValue) } }
                .sorted { $0.1 > $1.1 }.prefix(12)
            lines += ["", "System calls of \(whose) per push at 1,000/s (strace -c -f, a pass of its own):", ""]
            lines.append(top.map { "\($0.0) \(Self.format($0.1 / answers, 2))" }.joined(separator: ", "))
        }
        lines += tokenTable()
        lines += tlsTable()
        return lines.joined(separator: "\n")
    }

    private static func trimmed(_ number: Double) -> String {
        number == number.rounded() ? String(Int(number)) : String(number)
    }
}
