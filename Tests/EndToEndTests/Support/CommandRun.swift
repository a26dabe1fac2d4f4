import Foundation

/// A short-lived `duo-relay` command run to completion, its output collected through files.
///
/// `RelayProcess` reads pipes as the child writes; for a child that prints to standard output and
/// exits at once, the end of that pipe was seen only after `RelayProcess`'s 10-second wait, so
/// commands that finish immediately (`--help`, `push`) run here instead.
struct CommandRun {
    let status: Int32
    let standardOutput: String
    let standardError: String

    init(_ arguments: [String], environment: [String: String] = [:], timeoutSeconds: Double = 60) throws {
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
        process.environment = environment.merging(["PATH": "/usr/bin:/bin"]) { a, _ in a }
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
            throw TestFailure("duo-relay \(arguments.first ?? "") did not finish in \(timeoutSeconds) s")
        }
        try out.close()
        try err.close()
        status = process.terminationStatus
        standardOutput = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        standardError = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    }
}
