import Foundation

/// One run of the `duo-relay` binary to its end, with its exit status and both outputs: for commands that exit
/// by themselves (`check`, `--help`, `keygen`), many times per test, so it reads the pipes to their end rather
/// than polling.
struct CommandRun {
    var status: Int32
    var standardOutput: String
    var standardError: String
    var output: String { standardOutput + standardError }

    /// Runs `duo-relay <arguments>` with exactly `environment` (plus `PATH` and the sanitizer settings
    /// ``RelayProcess`` passes on). A command still running after `timeoutSeconds` (a `serve` that started
    /// when it should not have) gets SIGTERM.
    static func run(
        _ arguments: [String], environment: [String: String] = [:], timeoutSeconds: Double = 30
    ) throws -> CommandRun {
        let process = Process()
        process.executableURL = RelayProcess.binary
        process.arguments = arguments
        var childEnvironment = environment.merging(["PATH": "/usr/bin:/bin"]) { a, _ in a }
        let own = ProcessInfo.processInfo.environment
        for name in RelayProcess.sanitizerVariables where childEnvironment[name] == nil {
            childEnvironment[name] = own[name]
        }
        process.environment = childEnvironment
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let watchdog = DispatchWorkItem { [process] in if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeoutSeconds, execute: watchdog)
        defer { watchdog.cancel() }
        let errors = ErrorText()
        let reader = Thread { errors.set(err.fileHandleForReading.readDataToEndOfFile()) }
        reader.start()
        let standardOutput = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let standardError = errors.wait()
        return CommandRun(
            status: process.terminationStatus, standardOutput: String(decoding: standardOutput, as: UTF8.self),
            standardError: String(decoding: standardError, as: UTF8.self))
    }
}

/// Standard error, read to its end on another thread.
private final class ErrorText: @unchecked Sendable {
    // @unchecked: `data` is written once before `done` is signalled and read only after waiting for it.
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    func set(_ data: Data) {
        self.data = data
        done.signal()
    }

    func wait() -> Data {
        done.wait()
        return data
    }
}
