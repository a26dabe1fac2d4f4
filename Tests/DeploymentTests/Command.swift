import Foundation

/// What a finished command printed and how it exited.
struct CommandResult {
    let status: Int32
    let output: String
    let errors: String
}

/// Runs a tool to completion, its output collected through files (no pipe can fill up and stall it).
enum Command {
    static func isAvailable(_ executable: String) -> Bool {
        FileManager.default.isExecutableFile(atPath: executable)
    }

    /// Runs `executable` with `arguments`; the environment is this process's, with `environment` laid over it.
    /// A command still running after `timeout` seconds is terminated (and reported by its status).
    static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        in directory: URL? = nil, timeout: TimeInterval = 60
    ) throws -> CommandResult {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let outputURL = scratch.url.appendingPathComponent("stdout")
        let errorsURL = scratch.url.appendingPathComponent("stderr")
        guard FileManager.default.createFile(atPath: outputURL.path, contents: nil),
            FileManager.default.createFile(atPath: errorsURL.path, contents: nil)
        else { throw CocoaError(.fileWriteUnknown) }
        let output = try FileHandle(forWritingTo: outputURL)
        let errors = try FileHandle(forWritingTo: errorsURL)
        defer {
            try? output.close()
            try? errors.close()
        }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        if let directory { process.currentDirectoryURL = directory }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline {
            usleep(5_000)
        }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return CommandResult(
            status: process.terminationStatus,
            output: try String(contentsOf: outputURL, encoding: .utf8),
            errors: try String(contentsOf: errorsURL, encoding: .utf8))
    }
}

/// A fresh directory under the system's temporary folder, removed by `remove()`.
struct TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("duo-relay-deploy-" + UUID().uuidString)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func write(_ text: String, to name: String, mode: Int = 0o644) throws -> URL {
        let file = url.appendingPathComponent(name)
        try text.write(to: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file.path)
        return file
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}
