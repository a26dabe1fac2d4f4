import Foundation

/// What a finished tool printed and how it exited.
public struct ToolResult: Sendable {
    public let status: Int32
    /// Standard output.
    public let output: String
    /// Standard error.
    public let errors: String
}

/// Runs a command-line tool (openssl, curl, promtool, ip) to completion. Its output goes through files,
/// so a verbose tool cannot fill a pipe and stall; one still running at `timeout` is terminated (and
/// reported by its status). The environment is this process's with `environment` laid over it.
public enum Tool {
    public static func isAvailable(_ executable: String) -> Bool {
        FileManager.default.isExecutableFile(atPath: executable)
    }

    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        in directory: URL? = nil, timeout: Duration = .seconds(60)
    ) throws -> ToolResult {
        let tool = try ToolProcess(executable, arguments, environment: environment, directory: directory)
        try tool.process.run()
        if !Poll.until(within: timeout, every: .milliseconds(5), { !tool.process.isRunning }) {
            tool.process.terminate()
        }
        tool.process.waitUntilExit()
        return try tool.finish()
    }

    /// The same for async tests: it waits without holding a thread of the cooperative pool.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        in directory: URL? = nil, timeout: Duration = .seconds(60)
    ) async throws -> ToolResult {
        let tool = try ToolProcess(executable, arguments, environment: environment, directory: directory)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            tool.process.terminationHandler = { _ in continuation.resume() }
            do { try tool.process.run() } catch { continuation.resume(throwing: error) }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout.seconds) {
                if tool.process.isRunning { tool.process.terminate() }
            }
        }
        // At once now; it also drops the run loop source by which Foundation's Process holds itself.
        tool.process.waitUntilExit()
        return try tool.finish()
    }
}

/// One tool's process and the scratch files its output goes to.
private final class ToolProcess: @unchecked Sendable {
    // @unchecked: made, started and finished by one caller; the timeout only reads `isRunning` and
    // may call `terminate`, which Process allows from any thread.
    let process = Process()
    private let scratch: URL
    private let output: FileHandle
    private let errors: FileHandle

    init(_ executable: String, _ arguments: [String], environment: [String: String], directory: URL?) throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("duo-relay-tool-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        for name in ["stdout", "stderr"] {
            guard FileManager.default.createFile(atPath: scratch.appendingPathComponent(name).path, contents: nil)
            else { throw CocoaError(.fileWriteUnknown) }
        }
        output = try FileHandle(forWritingTo: scratch.appendingPathComponent("stdout"))
        errors = try FileHandle(forWritingTo: scratch.appendingPathComponent("stderr"))
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        if let directory { process.currentDirectoryURL = directory }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = errors
    }

    /// Once the process has exited: its status and what it printed; the scratch files are removed.
    func finish() throws -> ToolResult {
        try? output.close()
        try? errors.close()
        defer { try? FileManager.default.removeItem(at: scratch) }
        func text(_ name: String) throws -> String {
            String(decoding: try Data(contentsOf: scratch.appendingPathComponent(name)), as: UTF8.self)
        }
        return ToolResult(status: process.terminationStatus, output: try text("stdout"), errors: try text("stderr"))
    }

    deinit {
        try? output.close()
        try? errors.close()
        try? FileManager.default.removeItem(at: scratch)
    }
}
