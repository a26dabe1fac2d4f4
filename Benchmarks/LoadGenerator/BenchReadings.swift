import Foundation

/// What a benchmark run reads from the servers and the measurements it starts: the relay's port from its
/// log, redis-server's counters, a load run's answers, and the results file's lines.
enum BenchReadings {
    /// The port of the relay's `duo-relay: listening on 127.0.0.1:PORT` line (after the line's time and level);
    /// nil until it has logged it.
    static func listeningPort(log: String) -> Int? {
        let prefix = "duo-relay: listening on 127.0.0.1:"
        for line in log.split(separator: "\n") {
            guard let found = line.range(of: prefix) else { continue }
            let digits = line[found.upperBound...]
            if !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
                let port = Int(digits), port > 0, port < 65536
            {
                return port
            }
        }
        return nil
    }

    /// One line of the results file: a step's output, which is one JSON object; nil when the step printed
    /// nothing (it failed), which leaves its figures null.
    static func resultLine(step: String, output: String) -> String? {
        let data = output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !data.isEmpty else { return nil }
        return "{\"step\":\(JSONText.string(step)),\"data\":\(data)}"
    }

    /// The requests a load run's JSON says were answered (`measured` of an open loop, `answers` of a closed one).
    static func answeredRequests(_ output: String) -> Int? {
        guard let object = JSONText.object(Substring(output)) else { return nil }
        return (BenchReport.number(object, "measured") ?? BenchReport.number(object, "answers")).map { Int($0) }
    }

    /// The single PID in /proc/PID/task/PID/children: nginx's one worker.
    static func onlyChild(_ children: String) -> Int32? {
        let pids = children.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) }
        return pids.count == 1 ? pids[0] : nil
    }

    /// "N cores, MODEL, KERNEL": the machine a run's figures belong to.
    static func machine(cores: Int, cpuinfo: String, kernel: String) -> String {
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .flatMap { line in line.range(of: ": ").map { String(line[$0.upperBound...]) } }
        return "\(cores) cores, \(model ?? ""), \(kernel)"
    }

    /// perf's by-symbol report, its comments and blank lines left out, the first 40 lines.
    static func perfSymbols(_ report: String) -> String {
        let lines = report.split(separator: "\n", omittingEmptySubsequences: true).filter { !$0.hasPrefix("#") }
        return lines.prefix(40).joined(separator: "\n") + (lines.isEmpty ? "" : "\n")
    }
}

/// redis-server's `INFO all`: the counters a run compares before and after its saturated rounds.
struct RedisInfo: Equatable {
    /// `name:value` lines.
    var counters: [String: Int] = [:]
    /// `cmdstat_NAME:calls=N,usec=U,...`: the calls of each command and the microseconds spent in them.
    var commands: [String: (calls: Int, microseconds: Int)] = [:]

    init(_ text: String) {
        for line in text.split(whereSeparator: \.isNewline) {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...]
            if name.hasPrefix("cmdstat_") {
                var fields: [Substring: Int] = [:]
                for pair in value.split(separator: ",") {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    if parts.count == 2, let number = Int(parts[1]) { fields[parts[0]] = number }
                }
                if let calls = fields["calls"], let usec = fields["usec"] {
                    commands[String(name.dropFirst("cmdstat_".count))] = (calls, usec)
                }
            } else if let number = Int(value) {
                counters[name] = number
            }
        }
    }

    static func == (a: RedisInfo, b: RedisInfo) -> Bool {
        a.counters == b.counters
            && a.commands.mapValues { [$0.calls, $0.microseconds] }
                == b.commands.mapValues { [$0.calls, $0.microseconds] }
    }

    /// The reads redis-server processed and the script calls it ran (a command never called counts 0).
    var reads: Int { counters["total_reads_processed"] ?? 0 }
    var scriptCalls: Int { commands["evalsha"]?.calls ?? 0 }
    var scriptMicroseconds: Int { commands["evalsha"]?.microseconds ?? 0 }

    /// While saturated: how many script calls each of redis-server's reads carried, and how long a call ran
    /// (BENCHMARKS.md, "How a run works"); nil when the run made none.
    static func sharing(before: RedisInfo, after: RedisInfo) -> String? {
        let reads = after.reads - before.reads
        let calls = after.scriptCalls - before.scriptCalls
        let microseconds = after.scriptMicroseconds - before.scriptMicroseconds
        guard reads > 0, calls > 0 else { return nil }
        return "saturated, redis-server ran \(calls) script calls in \(reads) reads "
            + "(\(String(format: "%.1f", Double(calls) / Double(reads))) a read), "
            + "\(String(format: "%.1f", Double(microseconds) / Double(calls))) µs in each call"
    }
}
