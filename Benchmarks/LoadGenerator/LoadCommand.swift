import EventLoops
import Foundation
import Glibc
import RelayCore
import RelayCrypto
import RelayServer
import TCPForwarder

/// The subcommands of `duo-relay-load`, the benchmark's load generator (see scripts/bench).
enum LoadCommand {
    static let usage = """
        usage: duo-relay-load COMMAND [--option value]...

          simulator --dir D [--port N]     run the APNs simulator with the key and TLS identity in D
          prepare --dir D                  make D's APNs key and simulator TLS identity
          apns-request --dir D             write D/payload.json and D/headers.txt; print the request path
          mint --target H:P --count N --out FILE [--connections C]
                                           mint N grants (fresh tokens), write one push body per line
          grant-bodies --count N --out FILE
                                           write N grant request bodies (fresh random tokens), one per line
          open-loop --target H:P --bodies FILE --rate R --seconds S [--warmup S] [--connections C]
                    [--path P] [--pid NAME=PID]...
                                           push at a fixed rate; print latency (and each PID's CPU per
                                           answer over the run) as one JSON line
          closed-loop --target H:P --bodies FILE --connections C --seconds S [--warmup S] [--path P]
                    [--pid NAME=PID]...
                                           saturation: each connection sends again once answered; print
                                           answers/s, latency and each PID's CPU per answer as JSON
          direct --dir D --port N --seconds S [--warmup S] [--connections C] [--streams M] [--pid NAME=PID]...
                                           D's APNs request straight to the simulator with h2load (JSON)
          cpu --pid NAME=PID... --seconds S
                                           each PID's CPU (and threads started) over S seconds, as JSON
          syscalls --pid PID --target H:P --bodies FILE --rate R --seconds S [--warmup S] [--connections C]
                                           count PID's system calls (strace -c -f) during an open loop
                                           (after a warm-up at the same rate, not counted)
          forwarder --to H:P --delay-ms D --port-file FILE
                                           a TCP forwarder delaying every chunk by D ms each way, until
                                           SIGTERM; its port written to FILE
          report --results FILE --targets FILE --mode M
                                           the benchmark's figures from the steps' JSON lines in FILE,
                                           against the targets: a table, then one JSON line; exits 1
                                           when a figure could not be measured
          idle --target H:P --connections N --pid PID [--settle S] [--bodies FILE]
                                           hold N used keep-alive connections (each used for GET /healthz, or
                                           for a push of FILE's); print PID's memory as JSON
          (open-loop, closed-loop and idle take --ca-file FILE [--server-name NAME] for HTTPS: keep-alive TLS
           connections verifying the target's certificate against FILE and NAME, localhost unless given)
          sign-time --module M --uri U --key FILE [--count N]
                                           one provider token signed N times with the key U names in a token
                                           (PIN from APNS_PKCS11_PIN) and with FILE's: median and slowest (JSON)
          bench --relay-bin FILE [--mode full|smoke|cpu|redis|token|tls] [--configuration C] [--targets FILE]
                [--connections C] [--hop-ms D] [--relay-threads N] [--keep DIR] [--perf 1] [--verbose 1]
                [--perf-by-library FILE]
                                           a whole benchmark run (scripts/bench): starts the servers, runs
                                           the measurements above, then prints the report
          push-instructions --relay-bin FILE [--rate R] [--seconds S] [--store memory|redis] [--proxy tinyproxy]
                [--nginx 1] [--keep DIR] [--callgrind-by-library FILE]
                                           the relay's instructions per push under callgrind
                                           (scripts/push-instructions)
          soak --relay-bin FILE [--seconds S] [--rate R] [--seed N] [--gap-min S] [--gap-max S] [--warmup S]
               [--tail S] [--proxy tinyproxy|none] [--connections C] [--every-kind 1] [--out DIR] [--keep DIR]
                                           two relays, Redis with Sentinel, the APNs simulator and a proxy under
                                           load while a seeded schedule injects faults; checks every promise,
                                           writes DIR/soak.svg and prints one JSON line; exits 1 on a broken one
                                           (scripts/soak)
          soak-budgets --records DIR       the phones' budgets of a run kept with --keep DIR, judged again
        """

    static func run(_ arguments: [String]) -> Int32 {
        guard let command = arguments.first else {
            write(usage, to: STDERR_FILENO)
            return 64
        }
        do {
            let options = try Arguments(Array(arguments.dropFirst()))
            switch command {
            case "simulator":
                try BenchSimulator.serve(
                    .init(directory: try options.string("dir")), port: UInt16(try options.integer("port", default: 0)))
            case "prepare":
                try BenchSimulator.prepare(.init(directory: try options.string("dir")))
            case "apns-request":
                write(try BenchSimulator.writeRequest(.init(directory: try options.string("dir"))))
            case "mint":
                try mint(options)
            case "grant-bodies":
                try grantBodies(options)
            case "open-loop":
                try openLoop(options)
            case "closed-loop":
                try closedLoop(options)
            case "direct":
                try direct(options)
            case "cpu":
                try cpu(options)
            case "syscalls":
                try syscalls(options)
            case "forwarder":
                try forwarder(options)
            case "report":
                return try BenchReport.run(options)
            case "idle":
                try idle(options)
            case "sign-time":
                try SignTime.run(options)
            case "bench":
                return try BenchRun.run(options)
            case "push-instructions":
                return try PushInstructions.run(options)
            case "soak":
                return try SoakRun.run(options)
            case "soak-budgets":
                return try SoakRecords.judge(options)
            default:
                throw LoadError(.usage, "unknown command '\(command)'\n" + usage)
            }
            return 0
        } catch let error as LoadError {
            write("duo-relay-load: " + error.reason, to: STDERR_FILENO)
            return error.code == .usage ? 64 : 1
        } catch {
            write("duo-relay-load: \(error)", to: STDERR_FILENO)
            return 1
        }
    }

    private static func target(_ options: Arguments) throws(LoadError) -> (ResolvedAddress, String) {
        let text = try options.string("target")
        guard let target = LoadTarget(text) else {
            throw LoadError(.usage, "--target must be an IPv4 HOST:PORT")
        }
        return (target.address, text)
    }

    private static func mint(_ options: Arguments) throws {
        let (address, host) = try target(options)
        let minter = GrantMinter(
            address: address, host: host, count: try options.integer("count", default: 1000),
            connections: try options.integer("connections", default: 8),
            environment: options.string("environment", default: "sandbox"))
        let bodies = try minter.run()
        try (bodies.joined(separator: "\n") + "\n").write(
            toFile: try options.string("out"), atomically: true, encoding: .utf8)
    }

    private static func requests(_ options: Arguments, host: String) throws -> [[UInt8]] {
        let path = options.string("path", default: "/v1/push")
        let lines = try String(contentsOfFile: try options.string("bodies"), encoding: .utf8)
            .split(separator: "\n").filter { !$0.isEmpty }
        guard !lines.isEmpty else { throw LoadError(.usage, "--bodies holds no request body") }
        return lines.map { HTTPRequestBytes.post(path: path, host: host, body: Array($0.utf8)) }
    }

    private static func makeOpenLoop(_ options: Arguments, warmup: Double) throws -> OpenLoop {
        let (address, host) = try target(options)
        let rate = try options.number("rate", default: 2000)
        let seconds = try options.number("seconds", default: 10)
        guard rate > 0, seconds > 0 else { throw LoadError(.usage, "--rate and --seconds must be positive") }
        return OpenLoop(
            address: address, requests: try requests(options, host: host), rate: rate, seconds: seconds,
            warmupSeconds: try options.number("warmup", default: warmup),
            connections: try options.integer("connections", default: 64), tls: try LoadTLS.from(options, target: host))
    }

    private static func openLoop(_ options: Arguments) throws {
        let loop = try makeOpenLoop(options, warmup: 1)
        var watched = try WatchedProcesses(options)
        watched.start()
        let report = try loop.run()
        let usage = watched.finish(answers: report.statuses.values.reduce(0, +))
        let sorted = report.measured.sorted()
        let statuses = report.statuses.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }
        write(
            #"{"rate":\#(loop.rate),"seconds":\#(loop.seconds),"scheduled":\#(report.scheduled),"#
                + #""measured":\#(sorted.count),"p50_ms":\#(percentile(sorted, 0.5)),"#
                + #""p90_ms":\#(percentile(sorted, 0.9)),"p99_ms":\#(percentile(sorted, 0.99)),"#
                + #""p999_ms":\#(percentile(sorted, 0.999)),"max_ms":\#(sorted.last.map(milliseconds) ?? "null"),"#
                + #""statuses":{\#(statuses.joined(separator: ","))},"failures":\#(report.failures),"#
                + #""unanswered":\#(report.unanswered),\#(usage)}"#)
    }

    private static func closedLoop(_ options: Arguments) throws {
        let (address, host) = try target(options)
        let loop = ClosedLoop(
            address: address, requests: try requests(options, host: host),
            connections: try options.integer("connections", default: 64),
            seconds: try options.number("seconds", default: 6), warmupSeconds: try options.number("warmup", default: 0),
            tls: try LoadTLS.from(options, target: host))
        guard loop.connections > 0, loop.seconds > 0 else {
            throw LoadError(.usage, "--connections and --seconds must be positive")
        }
        let watched = try WatchedProcesses(options)
        let report = try loop.run(watching: watched)
        let sorted = report.latencies.sorted()
        let statuses = report.statuses.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }
        let rate = JSONText.number(Double(report.successes) / loop.seconds, digits: 0)
        write(
            #"{"connections":\#(loop.connections),"seconds":\#(loop.seconds),"answers":\#(report.answers),"#
                + #""ok":\#(report.successes),"rps":\#(rate),"p50_ms":\#(percentile(sorted, 0.5)),"#
                + #""p99_ms":\#(percentile(sorted, 0.99)),"statuses":{\#(statuses.joined(separator: ","))},"#
                + #""failures":\#(report.failures),\#(report.usage)}"#)
    }

    private static func direct(_ options: Arguments) throws {
        let load = DirectLoad(
            files: .init(directory: try options.string("dir")), port: try options.integer("port", default: 0),
            seconds: try options.number("seconds", default: 6), warmupSeconds: try options.number("warmup", default: 1),
            connections: try options.integer("connections", default: 2),
            streams: try options.integer("streams", default: 32))
        var watched = try WatchedProcesses(options)
        watched.start()
        let report = try load.run()
        // h2load counts the measured seconds only; the CPU reading spans warm-up too.
        let requests = Int(report.requestsPerSecond * (load.seconds + load.warmupSeconds))
        write(
            #"{"seconds":\#(load.seconds),"rps":\#(JSONText.number(report.requestsPerSecond, digits: 0)),"#
                + #""failed":\#(report.failed),"#
                + #"\#(watched.finish(answers: requests))}"#)
    }

    /// The processes' CPU over a stretch of time, whatever drives them (an idle relay's timers, say).
    private static func cpu(_ options: Arguments) throws {
        let seconds = try options.number("seconds", default: 1)
        guard seconds > 0, seconds <= 3600 else { throw LoadError(.usage, "--seconds must be in (0, 3600]") }
        var watched = try WatchedProcesses(options)
        guard !watched.processes.isEmpty else { throw LoadError(.usage, "--pid NAME=PID is required") }
        watched.start()
        usleep(UInt32(seconds * 1e6))
        write(#"{"seconds":\#(seconds),\#(watched.finish(answers: 0))}"#)
    }

    private static func syscalls(_ options: Arguments) throws {
        let pid = Int32(try options.integer("pid", default: 0))
        guard pid > 0 else { throw LoadError(.usage, "--pid PID is required") }
        var loop = try makeOpenLoop(options, warmup: 1)
        let warmup = loop.warmupSeconds
        loop.warmupSeconds = 0
        let report = try SyscallCount(pid: pid, loop: loop, warmupSeconds: warmup).run()
        let calls = report.calls.sorted { $0.value > $1.value }.map { "\(JSONText.string($0.key)):\($0.value)" }
        func perAnswer(_ count: Int) -> String {
            report.answers > 0 ? JSONText.number(Double(count) / Double(report.answers), digits: 2) : "null"
        }
        write(
            #"{"rate":\#(loop.rate),"scheduled":\#(Int((loop.rate * loop.seconds).rounded())),"#
                + #""answers":\#(report.answers),"ok":\#(report.successes),"syscalls":\#(report.total),"#
                + #""wakeups":\#(report.wakeups),"thread_starts":\#(report.threadStarts),"#
                + #""syscalls_per_push":\#(perAnswer(report.total)),"wakeups_per_push":\#(perAnswer(report.wakeups)),"#
                + #""calls":{\#(calls.joined(separator: ","))}}"#)
    }

    private static func forwarder(_ options: Arguments) throws {
        let target = try options.string("to")
        guard LoadTarget(target) != nil, let colon = target.lastIndex(of: ":"),
            let port = UInt16(target[target.index(after: colon)...])
        else { throw LoadError(.usage, "--to must be an IPv4 HOST:PORT") }
        let delay = try options.number("delay-ms", default: 0.5)
        let forwarder = try DelayingForwarder(
            to: String(target[..<colon]), port: port, delay: .microseconds(Int64(delay * 1000)))
        try String(forwarder.port).write(toFile: try options.string("port-file"), atomically: true, encoding: .utf8)
        TerminationSignals.wait()
        forwarder.stop()
    }

    private static func grantBodies(_ options: Arguments) throws {
        let count = try options.integer("count", default: 1024)
        let bodies = (0..<count).map { _ in
            #"{"token":"\#(Hex.encode(SecureRandom.bytes(count: 32)))","environment":"sandbox"}"#
        }
        try (bodies.joined(separator: "\n") + "\n").write(
            toFile: try options.string("out"), atomically: true, encoding: .utf8)
    }

    private static func percentile(_ sorted: [UInt64], _ p: Double) -> String {
        guard !sorted.isEmpty else { return "null" }
        let index = min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)
        return milliseconds(sorted[max(0, index)])
    }

    private static func idle(_ options: Arguments) throws {
        let (address, host) = try target(options)
        let idle = IdleConnections(
            address: address, host: host, count: try options.integer("connections", default: 10_000),
            relayPID: Int32(try options.integer("pid", default: 0)),
            settleSeconds: try options.number("settle", default: 2), tls: try LoadTLS.from(options, target: host),
            requests: options.all("bodies").isEmpty ? [] : try requests(options, host: host))
        let report = try idle.run()
        write(
            #"{"connections":\#(idle.count),"answered":\#(report.answered),"still_open":\#(report.stillOpen),"#
                + #""failures":\#(report.failures),"rss_kb":\#(report.rssKilobytes),"hwm_kb":\#(report.peakKilobytes)}"#
        )
    }

    private static func milliseconds(_ nanoseconds: UInt64) -> String {
        String(format: "%.3f", Double(nanoseconds) / 1e6)
    }

    static func write(_ line: String, to descriptor: Int32 = STDOUT_FILENO) {
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            guard written > 0 else { return }
            offset += written
        }
    }
}
