import Foundation
import RelayTestSupport

/// One run of the `duo-relay` binary to its end (`check`, `--help`, `keygen`, `push`), with its exit
/// status and both outputs, collected through files.
///
/// `RelayProcess` reads pipes as the child writes; for a child that prints to standard output and
/// exits at once, the end of that pipe was seen only after `RelayProcess`'s 10-second wait, so
/// commands that finish by themselves run here instead.
struct CommandRun {
    let status: Int32
    let standardOutput: String
    let standardError: String
    var output: String { standardOutput + standardError }

    /// Runs `duo-relay <arguments>` with exactly `environment` (plus `PATH` and the sanitizer settings
    /// ``RelayProcess`` passes on). A command still running after `timeoutSeconds` gets SIGTERM; that is a
    /// test failure unless `allowingTimeout` (a `serve` that started when it should not have: its output says why).
    init(
        _ arguments: [String], environment: [String: String] = [:], timeoutSeconds: Double = 60,
        allowingTimeout: Bool = false
    ) throws {
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let outPath = directory.appendingPathComponent("stdout").path
        let errPath = directory.appendingPathComponent("stderr").path
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        let process = Process()
        process.executableURL = RelayProcess.binary
        process.arguments = arguments
        process.environment = RelayProcess.childEnvironment(environment)
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        Poll.until(within: .seconds(timeoutSeconds), every: .milliseconds(10)) { !process.isRunning }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
            if !allowingTimeout {
                throw TestFailure("duo-relay \(arguments.first ?? "") did not finish in \(timeoutSeconds) s")
            }
        }
        try out.close()
        try err.close()
        status = process.terminationStatus
        standardOutput = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        standardError = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    }

    static func run(
        _ arguments: [String], environment: [String: String] = [:], timeoutSeconds: Double = 30
    ) throws -> CommandRun {
        try CommandRun(arguments, environment: environment, timeoutSeconds: timeoutSeconds, allowingTimeout: true)
    }
}
