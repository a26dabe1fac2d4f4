import APNsSimulator
import EventLoops
import Foundation
import Glibc
import RelayCore
import RelayCrypto
import Synchronization
import TCPForwarder

/// `soak` (scripts/soak): two relays sharing their limits through Redis with Sentinel (a primary, a replica, three
/// sentinels), the APNs simulator behind a forwarder (and optionally tinyproxy as the relays' egress proxy), and the
/// channels of ``SoakChannels`` pushing at a fixed rate while a seeded ``SoakSchedule`` injects faults; then
/// ``SoakAccounting`` checks every promise, ``SoakPicture`` draws `soak.svg`, and one JSON line of totals closes the
/// output. This is the shell: it starts, signals and stops processes; what it records is judged by the pure types.
final class SoakRun: @unchecked Sendable {
    // @unchecked Sendable: the sampler's thread reads only `watched`, `samples` and `deliveries` (behind their locks)
    // and the ports and `begin`, both set before it starts; everything else is the main thread's.
    struct Options {
        var relayBinary: String
        var seconds: Double
        var rate: Double
        var seed: UInt64
        var gap: ClosedRange<Double>
        var warmup: Double
        var tail: Double
        var proxy: Bool
        var output: String
        var connections: Int
        var everyKind: Bool
        var keep: String?

        init(_ options: Arguments) throws(LoadError) {
            relayBinary = try options.string("relay-bin")
            seconds = try options.number("seconds", default: 180)
            rate = try options.number("rate", default: 500)
            let seedText = options.string("seed", default: "")
            if seedText.isEmpty {
                seed = UInt64(Date().timeIntervalSince1970 * 1000) % 1_000_000
            } else {
                guard let value = UInt64(seedText) else { throw LoadError(.usage, "--seed must be a whole number") }
                seed = value
            }
            let low = try options.number("gap-min", default: 10)
            let high = try options.number("gap-max", default: 30)
            guard low > 0, high >= low else { throw LoadError(.usage, "--gap-min and --gap-max: 0 < min <= max") }
            gap = low...high
            warmup = try options.number("warmup", default: 10)
            tail = try options.number("tail", default: 15)
            switch options.string("proxy", default: "tinyproxy") {
            case "tinyproxy": proxy = true
            case "none": proxy = false
            default: throw LoadError(.usage, "--proxy is tinyproxy or none")
            }
            output = options.string("out", default: ".")
            connections = try options.integer("connections", default: max(8, Int(rate / 8)))
            everyKind = options.string("every-kind", default: "0") == "1"
            keep = options.all("keep").last
            guard seconds > warmup + tail, rate > 0 else {
                throw LoadError(.usage, "--seconds must exceed --warmup and --tail; --rate must be positive")
            }
        }
    }

    static let master = "duo-limits"
    static let deadPrefix = "410"
    static let phoneLimit = 5
    static let phonePeriod = 10.0
    static let apnsTimeoutMilliseconds = 3000
    /// How many pushes one relay may answer 502 for TooManyProviderTokenUpdates after one ExpiredProviderToken: its
    /// APNs connections (two, the default cap) each refuse the renewed token once, for the pushes in flight on them
    /// then (a few dozen at most at the soak's rate), and are replaced.
    static let tokenRefusalsPerRelay = 50
    /// From this many seconds on, a run is judged as a long one (``SoakPolicy``'s warm-up and growth).
    static let longRun = 1800.0

    let options: Options
    let load: String
    let work: String
    let password = Hex.encode(SecureRandom.bytes(count: 16))
    let files: BenchSimulator.Files
    var simulator: APNsSimulator?
    var forwarder: DelayingForwarder?
    var proxy: BenchChild?
    var proxyPort = 0
    var redis: [Int: BenchChild] = [:]
    var redisPorts: [Int] = []
    var sentinels: [BenchChild] = []
    var sentinelPorts: [Int] = []
    var relays: [BenchChild?] = [nil, nil]
    var relayPorts: [Int] = []
    var metricsPorts: [Int] = []
    var relayLogs: [[String]] = [[], []]
    var keys: [(id: Int, key: String)] = []
    let deliveries = Mutex<[(apnsID: String, collapseID: String, at: UInt64)]>([])
    let samples = Mutex<[SoakSample]>([])
    /// Each relay's PID and start number, for the sampler.
    let watched = Mutex<[(pid: Int32, incarnation: Int)?]>([nil, nil])
    var begin: UInt64 = 0

    init(_ options: Options) throws {
        self.options = options
        (load, work) = try BenchChild.prepareRun("duo-relay-soak")
        files = .init(directory: work + "/apns")
    }

    static func run(_ arguments: Arguments) throws -> Int32 {
        let run = try SoakRun(try Options(arguments))
        defer { run.cleanUp() }
        return try run.main()
    }

    static func log(_ text: String) { LoadCommand.write("soak: " + text, to: STDERR_FILENO) }

    var kinds: [SoakFault] { SoakFault.allCases.filter { options.proxy || $0 != .proxyRestart } }

    func main() throws -> Int32 {
        let schedule = SoakSchedule(
            seed: options.seed, seconds: options.seconds, warmup: options.warmup, tail: options.tail,
            gap: options.gap, kinds: kinds)
        LoadCommand.write(schedule.text, to: STDERR_FILENO)
        if options.everyKind, !schedule.missing(from: kinds).isEmpty {
            let names = schedule.missing(from: kinds).map(\.rawValue).joined(separator: ", ")
            throw LoadError(.usage, "the schedule misses \(names): a longer run or shorter gaps")
        }
        try startServers()
        Self.log("servers up; relays on \(relayPorts.map(String.init).joined(separator: ", ")); pushing")

        begin = MonotonicClock.now()
        let loop = try EventLoop(name: "soak-channels")
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<SoakChannels.Records?>(nil)
        let phones = max(400, Int(options.rate * 4))
        let settings = SoakChannels.Settings(
            relays: relayPorts.map { (ResolvedAddress.literal("127.0.0.1", port: UInt16($0))!, "127.0.0.1:\($0)") },
            connectionsPerRelay: options.connections, rate: options.rate, seconds: options.seconds, settle: 40,
            phones: phones, hotPhones: 5, hotRate: 1, deadPhones: 3, deadPrefix: Self.deadPrefix,
            clientTimeout: 30, staleAfter: 20, seed: options.seed, begin: begin)
        let channels = try loop.performAndWait {
            let channels = SoakChannels(settings, loop: loop) { records in
                result.withLock { $0 = records }
                done.signal()
            }
            try channels.start()
            return LoopBound(channels, on: loop)
        }
        let sampler = Thread { [self] in sample(until: done) }
        sampler.start()

        var marks: [SoakPicture.Mark] = []
        var injected: [SoakFault: Int] = [:]
        for entry in schedule.entries {
            while seconds(MonotonicClock.now()) < entry.at && !BenchChild.live.interrupted { usleep(50_000) }
            guard !BenchChild.live.interrupted else { break }
            let at = seconds(MonotonicClock.now())
            Self.log("+" + JSONText.number(at, digits: 1) + "s " + entry.fault.rawValue)
            do {
                try inject(entry, channels: channels)
                marks.append(.init(at: at, name: entry.fault.rawValue))
                injected[entry.fault, default: 0] += 1
            } catch {
                Self.log("\(entry.fault.rawValue) could not be injected: \(error)")
            }
        }
        done.wait()
        done.signal()
        loop.stop()
        let records = result.withLock { $0! }
        Self.log("load ended; stopping the relays")
        for relay in relays.indices { stopRelay(relay) }
        return try report(records, marks: marks, injected: injected)
    }

    func seconds(_ instant: UInt64) -> Double { Double(Int64(instant) - Int64(begin)) / 1e9 }

    // MARK: - The report

    func report(_ records: SoakChannels.Records, marks: [SoakPicture.Mark], injected: [SoakFault: Int]) throws -> Int32
    {
        var pushByID: [String: Int] = [:]
        for (index, id) in records.ids.enumerated() { pushByID[id] = index }
        let deliveries = self.deliveries.withLock { $0 }.map {
            SoakDelivery(apnsID: $0.apnsID, push: pushByID[$0.collapseID] ?? -1, at: seconds($0.at))
        }
        let samples = self.samples.withLock { $0 }
        var policy = SoakPolicy(
            deadline: Double(Self.apnsTimeoutMilliseconds) / 1000 + 5, phoneLimit: Self.phoneLimit,
            phonePeriod: Self.phonePeriod, instances: 2)
        if options.seconds >= Self.longRun {
            // A long run holds each relay start to less growth after a longer warm-up: its caches and pools have
            // had five minutes to reach their size.
            policy.warmup = 300
            policy.rssGrowthKilobytes = 5120
        }
        policy.tokenUpdateRefusals = injected[.providerTokenRejected, default: 0] * 2 * Self.tokenRefusalsPerRelay
        let accounting = SoakAccounting(
            policy: policy, attempts: records.attempts, deliveries: deliveries, samples: samples)
        var verdict = accounting.verdict()
        var lines: [Substring] = []
        for path in relayLogs.joined() {
            lines += BenchRun.read(path).split(separator: "\n")
        }
        let identifiers = Set(records.identifiers + records.ids)
        let leaks = SoakAccounting.leakingLines(lines, identifiers: identifiers)
        var ports = Set(relayPorts + metricsPorts + redisPorts + sentinelPorts + [proxyPort])
        if let forwarder { ports.insert(Int(forwarder.port)) }
        if let simulator { ports.insert(Int(simulator.port)) }
        let addresses = SoakAccounting.addressLines(lines, serverPorts: ports)
        if addresses > 0 {
            verdict.violations.append(
                .init(promise: "no identifier in a log", detail: "\(addresses) log lines name a client's address"))
        }
        if leaks > 0 {
            verdict.violations.append(.init(promise: "no identifier in a log", detail: "\(leaks) log lines name one"))
        }
        // Failovers the schedule did not ask for: the sentinels called a live primary down, and may have promoted a
        // replica that held nothing yet (Redis losing the shared windows, which no client can make up for).
        let sentinelLog = BenchRun.read(work + "/sentinel-0/sentinel.log")
        let failovers = sentinelLog.components(separatedBy: "+switch-master").count - 1
        let unasked = max(0, failovers - injected[.redisPrimaryKill, default: 0])
        if unasked > 0 {
            Self.log(
                "the sentinels failed over \(unasked) times without a kill: Redis may have lost the shared windows "
                    + "then (see sentinel-0/sentinel.log)")
        }
        for kind in kinds where injected[kind, default: 0] == 0 && options.everyKind {
            verdict.violations.append(.init(promise: "every fault kind", detail: "\(kind.rawValue) was never injected"))
        }
        if options.keep != nil { try keepRecords(records.attempts, samples: samples) }
        let picture = SoakPicture(
            seconds: Int(records.elapsed.rounded(.up)), attempts: records.attempts, samples: samples, relays: 2,
            marks: marks)
        let svgPath = options.output + "/soak.svg"
        try picture.svg.write(toFile: svgPath, atomically: true, encoding: .utf8)
        for violation in verdict.violations {
            Self.log("BROKEN: \(violation.promise): \(violation.detail)")
        }
        for item in verdict.growth {
            Self.log(
                "relay \(item.relay) start \(item.incarnation + 1): after warm-up RSS +\(item.rssKilobytes) kB, "
                    + "descriptors +\(item.descriptors), threads +\(item.threads)")
        }
        let measured = Double(records.attempts.count { $0.sent < options.seconds }) / options.seconds
        var fields = [
            #""seed":\#(options.seed)"#, #""seconds":\#(JSONText.number(options.seconds, digits: 0))"#,
            #""rate":\#(JSONText.number(options.rate, digits: 0))"#,
            #""requests_per_second":\#(JSONText.number(measured, digits: 1))"#, #""new_pushes":\#(records.scheduled)"#,
            #""faults":\#(marks.count)"#,
            #""log_lines":\#(lines.count)"#, #""log_leaks":\#(leaks + addresses)"#,
            #""abandoned":\#(records.abandoned)"#, #""failovers":\#(failovers)"#, #""failovers_unasked":\#(unasked)"#,
        ]
        fields += verdict.totals.map { "\(JSONText.string($0.0)):\($0.1)" }
        let kinds = injected.sorted { $0.key.rawValue < $1.key.rawValue }.map {
            "\(JSONText.string($0.key.rawValue)):\($0.value)"
        }
        fields.append(#""injected":{\#(kinds.joined(separator: ","))}"#)
        fields.append(#""broken":\#(verdict.violations.count)"#)
        fields.append(#""svg":\#(JSONText.string(svgPath))"#)
        LoadCommand.write("{" + fields.joined(separator: ",") + "}")
        return verdict.violations.isEmpty ? 0 : 1
    }

    /// With `--keep`: every request's record and every sample as CSV beside the logs (numbers and names, no
    /// identifier), for looking into a broken promise.
    func keepRecords(_ attempts: [SoakAttempt], samples: [SoakSample]) throws {
        var lines = ["route,push,phone,relay,sent,ended,ending,status,error,limit,retry_after,apns_reason"]
        for attempt in attempts {
            lines.append(
                [
                    "\(attempt.route)", "\(attempt.push)", "\(attempt.phone)", "\(attempt.relay)",
                    JSONText.number(attempt.sent, digits: 4), JSONText.number(attempt.ended, digits: 4),
                    "\(attempt.ending)", "\(attempt.status)", attempt.error ?? "", attempt.limit ?? "",
                    attempt.retryAfter.map { String($0) } ?? "", attempt.apnsReason ?? "",
                ].joined(separator: ","))
        }
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: work + "/attempts.csv", atomically: true, encoding: .utf8)
        lines = ["at,relay,incarnation,rss_kb,descriptors,threads,limits,fallbacks"]
        for sample in samples {
            lines.append(
                [
                    JSONText.number(sample.at, digits: 2), "\(sample.relay)", "\(sample.incarnation)",
                    "\(sample.rssKilobytes)", "\(sample.descriptors)", "\(sample.threads)", sample.limits ?? "",
                    sample.fallbacks.map { String($0) } ?? "",
                ].joined(separator: ","))
        }
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: work + "/samples.csv", atomically: true, encoding: .utf8)
    }

    // MARK: - Sampling the relays

    func sample(until done: DispatchSemaphore) {
        while done.wait(timeout: .now() + 1) == .timedOut {
            let now = seconds(MonotonicClock.now())
            for (relay, entry) in watched.withLock({ $0 }).enumerated() {
                guard let entry else { continue }
                let status = BenchRun.read("/proc/\(entry.pid)/status")
                guard let rss = Self.field("VmRSS:", in: status), let threads = Self.field("Threads:", in: status)
                else { continue }
                let descriptors =
                    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(entry.pid)/fd").count) ?? 0
                let ready = SoakHTTP.get(port: relayPorts[relay], path: "/readyz")
                let limits = ready.flatMap { SoakChannels.value("limits", in: $0.body) }
                let fallbacks = SoakHTTP.get(port: metricsPorts[relay], path: "/metrics").flatMap {
                    Self.fallbacks(in: $0.body)
                }
                samples.withLock {
                    $0.append(
                        SoakSample(
                            at: now, relay: relay, incarnation: entry.incarnation, rssKilobytes: rss,
                            descriptors: descriptors, threads: threads, limits: limits, fallbacks: fallbacks))
                }
            }
        }
        done.signal()
    }

    /// The sum of `duo_relay_limits_store_fallback_total` over the phone limit's decisions.
    static func fallbacks(in metrics: String) -> Int? {
        let prefix = #"duo_relay_limits_store_fallback_total{limit="phone""#
        var total: Int?
        for line in metrics.split(separator: "\n") where line.hasPrefix(prefix) {
            total = (total ?? 0) + (line.split(separator: " ").last.flatMap { Int($0) } ?? 0)
        }
        return total ?? (metrics.contains("duo_relay_") ? 0 : nil)
    }

    static func field(_ name: String, in status: String) -> Int? {
        for line in status.split(separator: "\n") where line.hasPrefix(name) {
            return Int(line.dropFirst(name.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
    }
}

/// One blocking HTTP/1.1 GET on loopback with a one-second timeout: the sampler's `/readyz` and the start-up's
/// `/healthz`.
enum SoakHTTP {
    static func get(port: Int, path: String) -> (status: Int, body: String)? {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return nil }
        defer { close(socket) }
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return nil }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        guard send(socket, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else { return nil }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(socket, &buffer, buffer.count, 0)
            if count <= 0 { break }
            answer += buffer[0..<count]
        }
        let text = String(decoding: answer, as: UTF8.self)
        guard text.hasPrefix("HTTP/1."), text.count >= 12, let status = Int(text.dropFirst(9).prefix(3)) else {
            return nil
        }
        let body = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
        return (status, body)
    }
}
