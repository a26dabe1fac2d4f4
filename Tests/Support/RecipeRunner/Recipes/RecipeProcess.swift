import Foundation
import Glibc

/// A tool a recipe run starts (a documented block through bash, podman, openssl, kubectl, the APNs simulator),
/// run to its end or left in the background and stopped by its PID.
///
/// Started with posix_spawn and waited for with waitpid, its output into files. Not Foundation's `Process`,
/// which learns that a child ended when a socket the child inherited closes, and not a pipe, which ends when its
/// last writer does: a daemon such as conmon after `podman run -d`, or a server a block leaves in the background,
/// inherits both, and the command would never be seen to end while it lives.
///
/// The child gets the given standard input or /dev/null, no blocked signal and every signal's default action (the
/// descriptors this program opens are close-on-exec). Every running child is on a list that SIGINT or SIGTERM
/// stops once `stopChildrenOnSignal` is called (container-test does; doc-test runs as PID 1 of its own PID
/// namespace, whose end stops whatever still runs, and does not); after such a signal no new child starts but for
/// the clean-up's.
final class RecipeProcess {
    /// Where a child's standard output or error goes.
    enum Sink {
        case discard
        /// A file, truncated first.
        case file(String)
        /// A file, appended to.
        case append(String)
        /// Wherever standard output goes (`2>&1`; for standard error only).
        case output
        /// Into a file of its own, read back into `Finished`.
        case captured
        /// This program's own.
        case inherited
    }

    /// What a finished process gave.
    struct Finished {
        /// The exit status, 128 + the signal if one ended it, 127 if it could not be waited for.
        var status: Int32
        /// Its captured standard output (with its standard error when that went to `.output`).
        var output: String
        /// Its captured standard error.
        var error: String
        var succeeded: Bool { status == 0 }
        /// The last `count` lines of its standard error and output, for the lines before a FAIL line.
        func tail(_ count: Int) -> String {
            (output + error).split(separator: "\n").suffix(count).joined(separator: "\n")
        }
        /// Its standard error's last line.
        var lastErrorLine: String { error.split(separator: "\n").last.map(String.init) ?? "" }
    }

    let pid: pid_t
    private var exitStatus: Int32?
    private let outputCapture: Capture?
    private let errorCapture: Capture?

    /// Starts `executable` (a path, or a name looked up in PATH). `input` is its standard input (else /dev/null);
    /// `socket`, if any, its descriptor 3 (never 3 itself).
    /// Refused once the run is interrupted, but for the clean-up (`cleanUp`).
    init(
        _ executable: String, _ arguments: [String], input: Data? = nil, directory: String? = nil,
        environment: [String: String] = [:], output: Sink = .captured, error: Sink = .captured,
        cleanUp: Bool = false, passing socket: Int32? = nil
    ) throws(RecipeFailure) {
        if Self.interrupted && !cleanUp { throw RecipeFailure(.interrupted, "interrupted") }
        if case .captured = output { outputCapture = try Capture() } else { outputCapture = nil }
        if case .captured = error { errorCapture = try Capture() } else { errorCapture = nil }
        var inputPipe: [Int32] = [-1, -1]
        if input != nil {
            guard pipe(&inputPipe) == 0 else { throw .check("cannot make a pipe") }
            // Neither end is passed on to a later child (this one gets the read end as its input).
            for end in inputPipe { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        }
        do {
            defer { if inputPipe[0] >= 0 { close(inputPipe[0]) } }
            pid = try Self.spawn(
                executable, arguments, directory: directory, environment: environment, input: inputPipe[0],
                output: (output, outputCapture?.descriptor), error: (error, errorCapture?.descriptor),
                passing: socket)
        } catch {
            if inputPipe[1] >= 0 { close(inputPipe[1]) }
            throw error
        }
        if let input {
            // Written in the background: a process may read its input only after writing its output.
            let writer = inputPipe[1]
            Thread {
                input.withUnsafeBytes { bytes in
                    var offset = 0
                    while offset < bytes.count {
                        let count = Glibc.write(writer, bytes.baseAddress! + offset, bytes.count - offset)
                        if count <= 0 { break }
                        offset += count
                    }
                }
                close(writer)
            }.start()
        }
    }

    /// Runs `executable` to its end: its status and captured output. `timeout` kills it (SIGKILL) when passed,
    /// with status 137.
    static func run(
        _ executable: String, _ arguments: [String], input: Data? = nil, directory: String? = nil,
        environment: [String: String] = [:], output: Sink = .captured, error: Sink = .captured,
        timeout: Double? = nil, cleanUp: Bool = false
    ) throws(RecipeFailure) -> Finished {
        let process = try RecipeProcess(
            executable, arguments, input: input, directory: directory, environment: environment, output: output,
            error: error, cleanUp: cleanUp)
        if let timeout {
            let pid = process.pid
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
                if live.contains(pid) { kill(pid, SIGKILL) }
            }
        }
        return process.finish()
    }

    /// Runs `executable` and gives its standard output, trimmed; throws `failure` if it fails.
    static func output(
        _ executable: String, _ arguments: [String], else failure: String, environment: [String: String] = [:]
    ) throws(RecipeFailure) -> String {
        let finished = try run(executable, arguments, environment: environment)
        guard finished.succeeded else { throw .check(failure, detail: finished.tail(5)) }
        return finished.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Whether the process runs (it has not ended; once it has, it is reaped here).
    var isRunning: Bool {
        guard exitStatus == nil else { return false }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid { ended(Self.decode(status)) }
        return result == 0
    }

    /// Waits for the process to end; its exit status (128 + the signal if a signal ended it).
    @discardableResult
    func wait() -> Int32 {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else {
                ended(127)
                return 127
            }
        }
        ended(Self.decode(status))
        return Self.decode(status)
    }

    /// Waits for the process to end; its status and what it wrote into `.captured`.
    func finish() -> Finished {
        let status = wait()
        return Finished(status: status, output: outputCapture?.text() ?? "", error: errorCapture?.text() ?? "")
    }

    /// Stops a process left running (SIGTERM by its PID) and waits for it.
    func stop() {
        if exitStatus == nil { kill(pid, SIGTERM) }
        wait()
    }

    private func ended(_ status: Int32) {
        exitStatus = status
        Self.live.remove(pid)
    }

    /// `name`'s path: itself if it holds a slash, else the first executable of that name in `path` (this
    /// process's PATH if nil).
    static func find(_ name: String, path: String? = nil) -> String? {
        if name.contains("/") { return name }
        let path = path ?? ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }

    /// A wait status's exit status: 128 + the signal if one ended the process.
    static func decode(_ status: Int32) -> Int32 {
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (they are macros).
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Starts `executable` with `input` as its standard input (-1: /dev/null) and its output and error where the
    /// sinks say (a captured one into the descriptor given with it), `socket` as descriptor 3, in `directory`, with
    /// `environment` over this process's.
    private static func spawn(
        _ executable: String, _ arguments: [String], directory: String?, environment: [String: String],
        input: Int32, output: (Sink, Int32?), error: (Sink, Int32?), passing socket: Int32? = nil
    ) throws(RecipeFailure) -> pid_t {
        let merged = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        guard let path = find(executable, path: merged["PATH"]) else {
            throw .check("\(executable) is not installed")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if input >= 0 {
            posix_spawn_file_actions_adddup2(&actions, input, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        add(output.0, captured: output.1, as: 1, to: &actions)
        add(error.0, captured: error.1, as: 2, to: &actions)
        // A listening socket as systemd passes one (descriptor 3; dup2 from another number clears close-on-exec).
        if let socket { posix_spawn_file_actions_adddup2(&actions, socket, 3) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        var all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        // In `directory` through env's --chdir (glibc's posix_spawn_file_actions_addchdir_np is not imported):
        // env replaces itself with the command, which keeps the PID.
        let command = directory.map { ["/usr/bin/env", "--chdir=" + $0, path] } ?? [path]
        let argv = (command + arguments).map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv + envp { free(pointer) }
        }
        var pid: pid_t = 0
        // The list is locked while the child starts, so that a signal's handler never misses it.
        let result = live.adding { () -> (Int32, pid_t) in
            let result = posix_spawn(&pid, command[0], &actions, &attributes, argv, envp)
            return (result, result == 0 ? pid : 0)
        }
        guard result == 0 else { throw .check("\(executable) did not start (errno \(result))") }
        if interrupted && live.cleaningUp.pointee == 0 { kill(pid, SIGTERM) }
        return pid
    }

    private static func add(
        _ sink: Sink, captured: Int32?, as descriptor: Int32, to actions: inout posix_spawn_file_actions_t
    ) {
        switch sink {
        case .inherited: break
        case .output where descriptor == 2: posix_spawn_file_actions_adddup2(&actions, 1, 2)
        case .discard, .output:
            posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", O_WRONLY, 0)
        case .file(let path):
            posix_spawn_file_actions_addopen(&actions, descriptor, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        case .append(let path):
            posix_spawn_file_actions_addopen(&actions, descriptor, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        case .captured:
            if let captured { posix_spawn_file_actions_adddup2(&actions, captured, descriptor) }
        }
    }

    /// A file a process writes into, unlinked at once: read back through its own descriptor.
    private final class Capture {
        let descriptor: Int32

        init() throws(RecipeFailure) {
            var template = Array("/tmp/duo-recipes-output-XXXXXX".utf8CString)
            descriptor = mkstemp(&template)
            guard descriptor >= 0 else { throw .check("cannot make a file in /tmp") }
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            template.withUnsafeBufferPointer { name in _ = unlink(name.baseAddress!) }
        }

        deinit { close(descriptor) }

        func text() -> String {
            var data = Data()
            var buffer = [UInt8](repeating: 0, count: 65536)
            var offset: off_t = 0
            while true {
                let count = pread(descriptor, &buffer, buffer.count, offset)
                guard count > 0 else { break }
                data.append(contentsOf: buffer[0..<count])
                offset += off_t(count)
            }
            return String(decoding: data, as: UTF8.self)
        }
    }

    // MARK: - Stopping everything on a signal

    /// The PIDs of the running children in a fixed buffer the signal handler reads without locking, and whether
    /// a signal came (set by the handler).
    final class LiveList: @unchecked Sendable {
        static let capacity = 64
        let pids = UnsafeMutablePointer<Int32>.allocate(capacity: capacity)
        let signalled = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        /// Set while the run cleans up: a signal then stops nothing, so that the clean-up ends.
        let cleaningUp = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        private let lock = NSLock()

        init() {
            pids.initialize(repeating: 0, count: Self.capacity)
            signalled.initialize(to: 0)
            cleaningUp.initialize(to: 0)
        }

        /// Runs `start` (which gives a status and the PID it started, 0 for none) and lists the PID, under the lock.
        func adding(_ start: () -> (Int32, pid_t)) -> Int32 {
            lock.withLock {
                let (status, pid) = start()
                if pid > 0, let slot = (0..<Self.capacity).first(where: { pids[$0] == 0 }) { pids[slot] = pid }
                return status
            }
        }

        func contains(_ pid: pid_t) -> Bool {
            lock.withLock { (0..<Self.capacity).contains { pids[$0] == pid } }
        }

        func remove(_ pid: Int32) {
            lock.withLock {
                for slot in 0..<Self.capacity where pids[slot] == pid { pids[slot] = 0 }
            }
        }
    }

    static let live = LiveList()
    static var interrupted: Bool { live.signalled.pointee != 0 }

    /// From now on a signal stops no child: the clean-up runs to its end.
    static func beginCleanUp() { live.cleaningUp.pointee = 1 }

    /// On SIGINT or SIGTERM: SIGTERM to every running child, and no child started after it but the clean-up's.
    /// (A handler, not an ignored signal: a caught signal's disposition is not inherited by the children.)
    static func stopChildrenOnSignal() {
        _ = live
        for signal in [SIGINT, SIGTERM] {
            Glibc.signal(signal) { _ in
                RecipeProcess.live.signalled.pointee = 1
                guard RecipeProcess.live.cleaningUp.pointee == 0 else { return }
                let list = RecipeProcess.live.pids
                for slot in 0..<RecipeProcess.LiveList.capacity where list[slot] > 0 { kill(list[slot], SIGTERM) }
            }
        }
    }
}
