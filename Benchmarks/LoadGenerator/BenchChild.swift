import Foundation
import Glibc

/// A process a benchmark run starts (a server, a measurement, a tool), stopped by its PID. Every running one
/// is also on a list that an interrupted run (SIGINT, SIGTERM, SIGHUP) stops; after an interrupt no child
/// starts, so that the run ends through its usual clean-up.
final class BenchChild {
    /// Where a child's output goes.
    enum Sink {
        case inherit
        case discard
        /// This process's standard error (so that nothing but the report reaches standard output).
        case standardError
        /// A file, truncated first.
        case file(String)
        /// Wherever the output goes, through the same descriptor (for the error sink; `2>&1`).
        case output

        var isOutput: Bool {
            if case .output = self { return true }
            return false
        }
    }

    let process: Process
    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// Starts `executable` (a path, or a name looked up in PATH).
    init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], output: Sink = .standardError,
        error: Sink = .inherit
    ) throws {
        guard let path = Self.find(executable) else { throw LoadError(.failed, "\(executable) is not installed") }
        process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        let outputHandle = try Self.handle(output)
        process.standardOutput = outputHandle
        process.standardError = error.isOutput ? outputHandle : try Self.handle(error)
        guard !Self.live.interrupted else { throw LoadError(.failed, "interrupted") }
        try Self.withNoSignalBlocked { try process.run() }
        Self.live.add(process.processIdentifier)
        if Self.live.interrupted { kill(process.processIdentifier, SIGTERM) }
    }

    /// Runs `body` (which starts a process) with no signal blocked in this thread: a child inherits the
    /// thread's signal mask, and one started where SIGTERM is blocked (a test's thread, say) could not be
    /// stopped by it.
    private static func withNoSignalBlocked<T>(_ body: () throws -> T) rethrows -> T {
        var none = sigset_t()
        var previous = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        return try body()
    }

    /// Sends `signal` and waits for the process to exit.
    func stop(_ signal: Int32 = SIGTERM) {
        if process.isRunning { kill(process.processIdentifier, signal) }
        wait()
    }

    /// Waits for the process to exit; its exit status (128 + the signal if a signal ended it).
    @discardableResult
    func wait() -> Int32 {
        process.waitUntilExit()
        Self.live.remove(process.processIdentifier)
        return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
    }

    /// Runs `executable` to its end; its standard output, or nil if it failed.
    static func output(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], error: Sink = .inherit
    ) -> String? {
        guard !live.interrupted, let path = find(executable) else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        do {
            // (nil: inherited.)
            process.standardError = try handle(error)
            try withNoSignalBlocked { try process.run() }
        } catch { return nil }
        live.add(process.processIdentifier)
        if live.interrupted { kill(process.processIdentifier, SIGTERM) }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        live.remove(process.processIdentifier)
        guard process.terminationReason == .exit, process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// `name`'s path: itself if it holds a slash, else the first executable of that name in PATH.
    static func find(_ name: String) -> String? {
        if name.contains("/") { return name }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }

    private static func handle(_ sink: Sink) throws -> Any? {
        switch sink {
        case .inherit: return nil
        case .discard: return FileHandle.nullDevice
        case .standardError: return FileHandle.standardError
        case .output: return nil
        case .file(let path):
            guard FileManager.default.createFile(atPath: path, contents: nil),
                let handle = FileHandle(forWritingAtPath: path)
            else { throw LoadError(.failed, "cannot write \(path)") }
            return handle
        }
    }

    // MARK: - Stopping everything on an interrupt

    /// The PIDs of the running children, in a fixed buffer that the signal handler reads without locking, and
    /// whether a signal interrupted the run (set by the handler).
    final class LiveList: @unchecked Sendable {
        static let capacity = 64
        let pids = UnsafeMutablePointer<Int32>.allocate(capacity: capacity)
        let signalled = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        private let lock = NSLock()

        init() {
            pids.initialize(repeating: 0, count: Self.capacity)
            signalled.initialize(to: 0)
        }

        var interrupted: Bool { signalled.pointee != 0 }

        func add(_ pid: Int32) {
            lock.withLock {
                if let slot = (0..<Self.capacity).first(where: { pids[$0] == 0 }) { pids[slot] = pid }
            }
        }

        func remove(_ pid: Int32) {
            lock.withLock {
                for slot in 0..<Self.capacity where pids[slot] == pid { pids[slot] = 0 }
            }
        }
    }

    static let live = LiveList()

    /// On SIGINT, SIGTERM or SIGHUP: SIGTERM to every running child, and no child started after it. (A handler,
    /// not an ignored signal: a caught signal's disposition is not inherited by the children.)
    static func stopChildrenOnInterrupt() {
        _ = live
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            Glibc.signal(signal) { _ in
                BenchChild.live.signalled.pointee = 1
                let list = BenchChild.live.pids
                for slot in 0..<BenchChild.LiveList.capacity where list[slot] > 0 { kill(list[slot], SIGTERM) }
            }
        }
    }

    /// What a run that starts servers (`bench`, `push-instructions`) sets up first: a fresh directory under /tmp
    /// (`/tmp/NAME.XXXXXX`), the path of this binary (its measurements run as its children), and every child stopped
    /// on an interrupt.
    static func prepareRun(_ name: String) throws -> (load: String, work: String) {
        var template = Array("/tmp/\(name).XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw LoadError(.failed, "cannot make a directory in /tmp") }
        let load = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        stopChildrenOnInterrupt()
        return (load, String(cString: made))
    }
}
