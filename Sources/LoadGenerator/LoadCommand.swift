import Foundation
import Glibc

/// The subcommands of `duo-relay-load`, the benchmark's load generator (see scripts/bench).
enum LoadCommand {
    static let usage = """
        usage: duo-relay-load COMMAND [--option value]...

          simulator --dir D [--port N]     run the APNs simulator with the key and TLS identity in D
          prepare --dir D                  make D's APNs key and simulator TLS identity
          apns-request --dir D             write D/payload.json and D/headers.txt; print the request path
          mint --target H:P --count N --out FILE [--connections C]
                                           mint N grants (fresh tokens), write one push body per line
          open-loop --target H:P --bodies FILE --rate R --seconds S [--warmup S] [--connections C]
                                           push at a fixed rate; print latency as one JSON line
          idle --target H:P --connections N --pid PID [--settle S]
                                           hold N used keep-alive connections; print PID's memory as JSON
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
            case "open-loop":
                try openLoop(options)
            case "idle":
                try idle(options)
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

    private static func target(_ options: Arguments) throws(LoadError) -> (sockaddr_in, String) {
        let text = try options.string("target")
        guard let address = ClientConnection.address(text) else {
            throw LoadError(.usage, "--target must be an IPv4 HOST:PORT")
        }
        return (address, text)
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

    private static func openLoop(_ options: Arguments) throws {
        let (address, host) = try target(options)
        let path = options.string("path", default: "/v1/push")
        let lines = try String(contentsOfFile: try options.string("bodies"), encoding: .utf8)
            .split(separator: "\n").filter { !$0.isEmpty }
        guard !lines.isEmpty else { throw LoadError(.usage, "--bodies holds no request body") }
        let rate = try options.number("rate", default: 2000)
        let seconds = try options.number("seconds", default: 10)
        guard rate > 0, seconds > 0 else { throw LoadError(.usage, "--rate and --seconds must be positive") }
        let loop = OpenLoop(
            address: address,
            requests: lines.map { HTTPRequestBytes.post(path: path, host: host, body: Array($0.utf8)) },
            rate: rate, seconds: seconds, warmupSeconds: try options.number("warmup", default: 1),
            connections: try options.integer("connections", default: 64))
        let report = try loop.run()
        let sorted = report.measured.sorted()
        func percentile(_ p: Double) -> String {
            guard !sorted.isEmpty else { return "null" }
            let index = min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)
            return milliseconds(sorted[max(0, index)])
        }
        let statuses = report.statuses.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }
        write(
            #"{"rate":\#(rate),"scheduled":\#(report.scheduled),"measured":\#(sorted.count),"#
                + #""p50_ms":\#(percentile(0.5)),"p90_ms":\#(percentile(0.9)),"p99_ms":\#(percentile(0.99)),"#
                + #""p999_ms":\#(percentile(0.999)),"max_ms":\#(sorted.last.map(milliseconds) ?? "null"),"#
                + #""statuses":{\#(statuses.joined(separator: ","))},"failures":\#(report.failures),"#
                + #""unanswered":\#(report.unanswered)}"#)
    }

    private static func idle(_ options: Arguments) throws {
        let (address, host) = try target(options)
        let idle = IdleConnections(
            address: address, host: host, count: try options.integer("connections", default: 10_000),
            relayPID: Int32(try options.integer("pid", default: 0)),
            settleSeconds: try options.number("settle", default: 2))
        let report = try idle.run()
        write(
            #"{"connections":\#(idle.count),"answered":\#(report.answered),"still_open":\#(report.stillOpen),"#
                + #""failures":\#(report.failures),"rss_kb":\#(report.rssKilobytes),"hwm_kb":\#(report.peakKilobytes)}"#
        )
    }

    private static func milliseconds(_ nanoseconds: UInt64) -> String {
        String(format: "%.3f", Double(nanoseconds) / 1e6)
    }

    private static func write(_ line: String, to descriptor: Int32 = STDOUT_FILENO) {
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            guard written > 0 else { return }
            offset += written
        }
    }
}
