import Foundation
import Glibc

/// What a process has used so far, read from /proc: its CPU time (user + system, of every thread,
/// living or exited) and the ids of its living threads.
struct ProcessUsage {
    var ticks: UInt64
    var threads: Set<Int32>
    var peakKilobytes: Int

    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// Reads `pid` now; nil once the process is gone.
    static func read(_ pid: Int32) -> ProcessUsage? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let nameEnd = stat.lastIndex(of: ")")
        else { return nil }
        // After the name: state (field 3), ..., utime (14) and stime (15).
        let fields = stat[stat.index(after: nameEnd)...].split(separator: " ")
        guard fields.count > 12, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return ProcessUsage(
            ticks: user + system, threads: Set(tasks.compactMap { Int32($0) }),
            peakKilobytes: IdleConnections.memory(of: pid).peak)
    }
}

/// The processes a run measures (`--pid NAME=PID`, repeatable): each one's CPU per answer over the
/// run, the threads it started during the run (those still alive at its end: a thread that came
/// and went between the two readings is not seen), and its peak RSS.
struct WatchedProcesses {
    var processes: [(name: String, pid: Int32)]
    private var before: [ProcessUsage?] = []

    init(_ options: Arguments) throws(LoadError) {
        processes = []
        for text in options.all("pid") {
            let parts = text.split(separator: "=", maxSplits: 1)
            // `self`: the measurement's own process (the load generator's CPU beside what it loads).
            guard parts.count == 2, !parts[0].isEmpty, let pid = parts[1] == "self" ? getpid() : Int32(parts[1]),
                pid > 0
            else {
                throw LoadError(.usage, "--pid takes NAME=PID")
            }
            processes.append((String(parts[0]), pid))
        }
    }

    mutating func start() {
        before = processes.map { ProcessUsage.read($0.pid) }
    }

    /// The JSON members for the run since `start()`: `cpu_us` per answer, `cpu_ms` in all,
    /// `threads_started` and `hwm_kb`, each an object keyed by name (null where unreadable).
    func finish(answers: Int) -> String {
        let after = processes.map { ProcessUsage.read($0.pid) }
        var perAnswer: [String] = []
        var total: [String] = []
        var started: [String] = []
        var peak: [String] = []
        for (index, process) in processes.enumerated() {
            let key = JSONText.string(process.name) + ":"
            var values = ["null", "null", "null", "null"]
            if index < before.count, let first = before[index], let last = after[index] {
                let microseconds = Double(last.ticks - first.ticks) * 1e6 / ProcessUsage.ticksPerSecond
                values = [
                    answers > 0 ? JSONText.number(microseconds / Double(answers), digits: 1) : "null",
                    JSONText.number(microseconds / 1000, digits: 0),
                    String(last.threads.subtracting(first.threads).count), String(last.peakKilobytes),
                ]
            }
            perAnswer.append(key + values[0])
            total.append(key + values[1])
            started.append(key + values[2])
            peak.append(key + values[3])
        }
        return #""cpu_us":{\#(perAnswer.joined(separator: ","))},"cpu_ms":{\#(total.joined(separator: ","))},"#
            + #""threads_started":{\#(started.joined(separator: ","))},"hwm_kb":{\#(peak.joined(separator: ","))}"#
    }
}
