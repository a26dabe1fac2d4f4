import Foundation
import Glibc

/// Runs the tools a recipe run drives (podman, openssl, kubectl, the documented blocks through bash): to their
/// end with their output captured, or in the background (the APNs simulator). Every running one is on a list
/// that SIGINT or SIGTERM stops; after such a signal no new one starts but for the clean-up's.
enum ContainerProcesses {
    /// What a finished process gave.
    struct Finished {
        /// The exit status, 128 + the signal if one ended it.
        var status: Int32
        var output: String
        var error: String
        var succeeded: Bool { status == 0 }
        /// The last `count` lines of its standard error and output, for the lines before a FAIL line.
        func tail(_ count: Int) -> String {
            (output + error).split(separator: "\n").suffix(count).joined(separator: "\n")
        }
    }

    /// Runs `executable` (a path, or a name in PATH) to its end. `input` is its standard input; `timeout` kills
    /// it (SIGKILL) when passed, with status 137. Refused once the run is interrupted, but for the clean-up
    /// (`cleanUp`).
    static func run(
        _ executable: String, _ arguments: [String], input: Data? = nil, environment: [String: String] = [:],
        directory: String? = nil, timeout: Double? = nil, cleanUp: Bool = false
    ) throws(ContainerTestFailure) -> Finished {
        if interrupted && !cleanUp { throw ContainerTestFailure(.interrupted, "interrupted") }
        guard let path = find(executable) else { throw .check("\(executable) is not installed") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        // Output and error go to files, not pipes: a process may leave a daemon behind holding them (conmon,
        // for `podman run -d`), and a pipe would not end until the daemon does.
        let output = try Capture()
        let error = try Capture()
        let stdin = Pipe()
        process.standardOutput = output.handle
        process.standardError = error.handle
        process.standardInput = input == nil ? FileHandle.nullDevice : stdin
        do {
            try withNoSignalBlocked { try process.run() }
        } catch { throw .check("cannot start \(executable)") }
        live.add(process.processIdentifier)
        defer { live.remove(process.processIdentifier) }
        if let input {
            // Written in the background: a process may read its input only after writing its output.
            let writer = stdin.fileHandleForWriting
            Thread {
                writer.write(input)
                try? writer.close()
            }.start()
        }
        if let timeout {
            let pid = process.processIdentifier
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [process] in
                if process.isRunning { kill(pid, SIGKILL) }
            }
        }
        process.waitUntilExit()
        let status = process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
        return Finished(status: status, output: output.text(), error: error.text())
    }

    /// A file a process writes into, unlinked at once: read back through its own descriptor.
    private final class Capture {
        let handle: FileHandle

        init() throws(ContainerTestFailure) {
            var template = Array("/tmp/duo-container-test-output-XXXXXX".utf8CString)
            let descriptor = mkstemp(&template)
            guard descriptor >= 0 else { throw .check("cannot make a file in /tmp") }
            template.withUnsafeBufferPointer { name in _ = unlink(name.baseAddress!) }
            handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        }

        func text() -> String {
            var data = Data()
            var buffer = [UInt8](repeating: 0, count: 65536)
            var offset: off_t = 0
            while true {
                let count = pread(handle.fileDescriptor, &buffer, buffer.count, offset)
                guard count > 0 else { break }
                data.append(contentsOf: buffer[0..<count])
                offset += off_t(count)
            }
            return String(decoding: data, as: UTF8.self)
        }
    }

    /// Runs `executable` and gives its standard output, trimmed; throws `failure` if it fails.
    static func output(
        _ executable: String, _ arguments: [String], else failure: String, environment: [String: String] = [:]
    ) throws(ContainerTestFailure) -> String {
        let finished = try run(executable, arguments, environment: environment)
        guard finished.succeeded else { throw .check(failure, detail: finished.tail(5)) }
        return finished.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A process left running (a server), its standard output and error into `log`.
    static func start(_ executable: String, _ arguments: [String], log: String) throws(ContainerTestFailure) -> Process
    {
        if interrupted { throw ContainerTestFailure(.interrupted, "interrupted") }
        guard let path = find(executable), FileManager.default.createFile(atPath: log, contents: nil),
            let handle = FileHandle(forWritingAtPath: log)
        else { throw .check("cannot start \(executable)") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        do {
            try withNoSignalBlocked { try process.run() }
        } catch { throw .check("cannot start \(executable)") }
        live.add(process.processIdentifier)
        return process
    }

    /// Stops a process `start` started, by its PID.
    static func stop(_ process: Process) {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        process.waitUntilExit()
        live.remove(process.processIdentifier)
    }

    /// Polls `condition` up to `attempts` times, `pause` seconds apart; whether it held. Ends early when
    /// interrupted.
    static func poll(_ attempts: Int, pause: Double, _ condition: () throws(ContainerTestFailure) -> Bool)
        throws(ContainerTestFailure) -> Bool
    {
        for attempt in 0..<attempts {
            if interrupted { throw ContainerTestFailure(.interrupted, "interrupted") }
            if try condition() { return true }
            // The poll's pace: what it waits for is another process's doing, with no event to wait on.
            if attempt < attempts - 1 { _ = DispatchSemaphore(value: 0).wait(timeout: .now() + pause) }
        }
        return false
    }

    /// `name`'s path: itself if it holds a slash, else the first executable of that name in PATH.
    static func find(_ name: String) -> String? {
        if name.contains("/") { return name }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }

    /// Runs `body` (which starts a process) with no signal blocked in this thread: a child inherits the mask.
    private static func withNoSignalBlocked<T>(_ body: () throws -> T) rethrows -> T {
        var none = sigset_t()
        var previous = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        return try body()
    }

    // MARK: - Stopping everything on a signal

    /// The PIDs of the running children in a fixed buffer the signal handler reads without locking, and whether
    /// a signal came (set by the handler).
    final class LiveList: @unchecked Sendable {
        static let capacity = 64
        let pids = UnsafeMutablePointer<Int32>.allocate(capacity: capacity)
        let signalled = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        private let lock = NSLock()

        init() {
            pids.initialize(repeating: 0, count: Self.capacity)
            signalled.initialize(to: 0)
        }

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
    static var interrupted: Bool { live.signalled.pointee != 0 }

    /// On SIGINT or SIGTERM: SIGTERM to every running child, and no child started after it but the clean-up's.
    /// (A handler, not an ignored signal: a caught signal's disposition is not inherited by the children.)
    static func stopChildrenOnSignal() {
        _ = live
        for signal in [SIGINT, SIGTERM] {
            Glibc.signal(signal) { _ in
                ContainerProcesses.live.signalled.pointee = 1
                let list = ContainerProcesses.live.pids
                for slot in 0..<ContainerProcesses.LiveList.capacity where list[slot] > 0 { kill(list[slot], SIGTERM) }
            }
        }
    }
}
