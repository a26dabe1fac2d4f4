import Foundation
import Glibc

/// A process the doc test starts (a documented block in bash, the simulator, a tool), with its output in files.
/// Stopped by its PID; whatever still runs at the end goes with the run's PID namespace.
final class DocTestChild {
    /// Where a child's standard output or error goes.
    enum Sink {
        case discard
        /// A file, truncated first.
        case file(String)
        /// A file, appended to.
        case append(String)
        /// Wherever standard output goes (`2>&1`; for standard error only).
        case output
    }

    let process: Process
    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// Starts `executable` (a path, or a name looked up in PATH) with standard input from /dev/null.
    init(
        _ executable: String, _ arguments: [String], directory: String? = nil, environment: [String: String] = [:],
        output: Sink, error: Sink = .output
    ) throws {
        process = try Self.process(executable, arguments, directory: directory, environment: environment)
        let outputHandle = try Self.handle(output)
        process.standardOutput = outputHandle
        if case .output = error {
            process.standardError = outputHandle
        } else {
            process.standardError = try Self.handle(error)
        }
        try Self.withNoSignalBlocked { try process.run() }
    }

    /// Waits for the process to exit; its exit status (128 + the signal if a signal ended it).
    @discardableResult
    func wait() -> Int32 {
        process.waitUntilExit()
        return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
    }

    /// Runs `executable` to its end; its exit status (127 if it could not start).
    static func run(
        _ executable: String, _ arguments: [String], directory: String? = nil, environment: [String: String] = [:],
        output: Sink, error: Sink = .output
    ) -> Int32 {
        guard
            let child = try? DocTestChild(
                executable, arguments, directory: directory, environment: environment, output: output, error: error)
        else { return 127 }
        return child.wait()
    }

    /// Runs `executable` to its end; its exit status and its standard output as text, with its standard error
    /// too (`2>&1`) or, with `withError` false, standard error left to this process's.
    static func capture(
        _ executable: String, _ arguments: [String], directory: String? = nil, environment: [String: String] = [:],
        withError: Bool = true
    ) -> (status: Int32, text: String) {
        guard let process = try? process(executable, arguments, directory: directory, environment: environment) else {
            return (127, "\(executable) is not installed")
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        if withError { process.standardError = pipe }
        do { try withNoSignalBlocked { try process.run() } } catch { return (127, "\(executable) did not start") }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let status = process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
        return (status, String(decoding: data, as: UTF8.self))
    }

    /// `name`'s path: itself if it holds a slash, else the first executable of that name in PATH.
    static func find(_ name: String, path: String? = nil) -> String? {
        if name.contains("/") { return name }
        let path = path ?? ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }

    private static func process(
        _ executable: String, _ arguments: [String], directory: String?, environment: [String: String]
    ) throws -> Process {
        let merged = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        guard let path = find(executable, path: merged["PATH"]) else {
            throw DocTestFailure(scenario: "doc-test", what: "\(executable) is not installed")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = merged
        process.standardInput = FileHandle.nullDevice
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        return process
    }

    private static func handle(_ sink: Sink) throws -> FileHandle {
        switch sink {
        case .discard, .output: return FileHandle.nullDevice
        case .file(let path), .append(let path):
            var flags = O_WRONLY | O_CREAT | O_CLOEXEC
            if case .append = sink { flags |= O_APPEND } else { flags |= O_TRUNC }
            let descriptor = open(path, flags, 0o644)
            guard descriptor >= 0 else { throw DocTestFailure(scenario: "doc-test", what: "cannot write \(path)") }
            return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        }
    }

    /// Runs `body` (which starts a process) with no signal blocked in this thread: a child inherits the thread's
    /// signal mask, and one started where SIGTERM or SIGINT is blocked could not be stopped by it.
    private static func withNoSignalBlocked<T>(_ body: () throws -> T) rethrows -> T {
        var none = sigset_t()
        var previous = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        return try body()
    }
}
