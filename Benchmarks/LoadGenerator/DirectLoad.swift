import Foundation
import Glibc

/// `direct`: the relay's APNs requests sent straight to the simulator by h2load (HTTP/2, closed
/// loop), the baseline of the benchmark's `ratio`; h2load's summary read into numbers here.
struct DirectLoad {
    var files: BenchSimulator.Files
    var port: Int
    var seconds: Double
    var warmupSeconds: Double
    var connections: Int
    var streams: Int

    struct Report {
        var requestsPerSecond: Double
        var failed: Int
    }

    func run() throws -> Report {
        let path = try BenchSimulator.writeRequest(files)
        let headers = try String(contentsOfFile: files.directory + "/headers.txt", encoding: .utf8)
            .split(separator: "\n").flatMap { ["-H", String($0)] }
        let h2load = Process()
        h2load.executableURL = URL(fileURLWithPath: "/usr/bin/h2load")
        h2load.arguments =
            [
                "-t", "1", "-c", String(connections), "-m", String(streams), "-D", Self.text(seconds),
                "--warm-up-time=" + Self.text(warmupSeconds), "-d", files.directory + "/payload.json",
            ] + headers + ["https://127.0.0.1:\(port)\(path)"]
        let pipe = Pipe()
        h2load.standardOutput = pipe
        h2load.standardError = pipe
        try h2load.run()
        // h2load ends by itself after warm-up and measurement; a stuck one is stopped.
        let watchdog = DispatchWorkItem { [h2load] in if h2load.isRunning { h2load.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + warmupSeconds + seconds + 30, execute: watchdog)
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        h2load.waitUntilExit()
        watchdog.cancel()
        guard let report = Self.parse(output) else {
            throw LoadError(.failed, "h2load printed no summary:\n" + output)
        }
        return report
    }

    /// h2load takes whole numbers with a unit.
    private static func text(_ seconds: Double) -> String { "\(Int((seconds * 1000).rounded()))ms" }

    /// `finished in 6.00s, 51921.33 req/s, ...` and
    /// `requests: N total, N started, N done, N succeeded, F failed, E errored, T timeout`.
    static func parse(_ output: String) -> Report? {
        var rate: Double?
        var failed: Int?
        for line in output.split(separator: "\n") {
            let fields = line.replacingOccurrences(of: ",", with: "").split(separator: " ")
            if line.hasPrefix("finished in"), fields.count > 3 {
                rate = Double(fields[3])
            } else if line.hasPrefix("requests:"), fields.count > 13 {
                failed = [9, 11, 13].reduce(0) { $0 + (Int(fields[$1]) ?? 0) }
            }
        }
        guard let rate, let failed else { return nil }
        return Report(requestsPerSecond: rate, failed: failed)
    }
}
