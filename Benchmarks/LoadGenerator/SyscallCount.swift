import Foundation
import Glibc

/// `syscalls`: counts a process's system calls (`strace -c -f`, attached to every thread) while
/// an open loop pushes at a fixed rate, in a pass of its own, since strace slows the process it
/// counts. Wake-ups are the returns of the calls that wait for readiness (epoll, poll, select).
/// The same load runs for `warmupSeconds` before strace attaches, so that what is counted is the
/// steady state (connections to APNs open), not the start-up.
struct SyscallCount {
    var pid: Int32
    var loop: OpenLoop
    var warmupSeconds: Double

    static let waits: Set<String> = [
        "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6",
    ]
    static let threadStarts: Set<String> = ["clone", "clone3"]

    struct Report {
        var answers = 0
        var successes = 0
        var calls: [String: Int] = [:]

        var total: Int { calls.values.reduce(0, +) }
        var wakeups: Int { calls.filter { SyscallCount.waits.contains($0.key) }.values.reduce(0, +) }
        var threadStarts: Int { calls.filter { SyscallCount.threadStarts.contains($0.key) }.values.reduce(0, +) }
    }

    func run() throws -> Report {
        if warmupSeconds > 0 {
            var warmup = loop
            warmup.seconds = warmupSeconds
            warmup.warmupSeconds = 0
            _ = try warmup.run()
        }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("duo-relay-strace-\(getpid()).txt")
        defer { try? FileManager.default.removeItem(at: output) }
        let strace = Process()
        strace.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
        strace.arguments = ["-c", "-f", "-q", "-p", String(pid), "-o", output.path]
        strace.standardOutput = FileHandle.nullDevice
        try strace.run()
        defer {
            if strace.isRunning { kill(strace.processIdentifier, SIGKILL) }
        }
        try Self.waitUntilTraced(pid, by: strace)

        let loopReport = try loop.run()
        // SIGINT: strace detaches and writes its summary.
        kill(strace.processIdentifier, SIGINT)
        let deadline = Date().addingTimeInterval(10)
        // A pace while strace writes its summary (its end is seen only by looking).
        while strace.isRunning && Date() < deadline { usleep(20_000) }
        guard !strace.isRunning else { throw LoadError(.failed, "strace did not finish within 10 s") }

        var report = Report()
        report.answers = loopReport.statuses.values.reduce(0, +)
        report.successes = loopReport.statuses[200] ?? 0
        report.calls = Self.parse(try String(contentsOf: output, encoding: .utf8))
        guard !report.calls.isEmpty else { throw LoadError(.failed, "strace counted no system call") }
        return report
    }

    /// Waits (up to 10 s) until every thread of `pid` has `tracer` as its tracer.
    private static func waitUntilTraced(_ pid: Int32, by tracer: Process) throws(LoadError) {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            guard tracer.isRunning else { throw LoadError(.failed, "strace could not attach to the process") }
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            let traced = tasks.allSatisfy { task in
                let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
                return status.contains("TracerPid:\t\(tracer.processIdentifier)\n")
            }
            if !tasks.isEmpty && traced { return }
            // A pace: the tracer's attachment shows only in /proc, looked at again every 20 ms.
            usleep(20_000)
        }
        throw LoadError(.failed, "strace did not attach within 10 s")
    }

    /// strace's summary table: `% time, seconds, usecs/call, calls, [errors,] syscall` per line.
    static func parse(_ summary: String) -> [String: Int] {
        var calls: [String: Int] = [:]
        for line in summary.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 5, let name = fields.last, name != "total", Double(fields[0]) != nil,
                let count = Int(fields[3])
            else { continue }
            calls[String(name), default: 0] += count
        }
        return calls
    }
}
