import Foundation
import Glibc

/// Runs the tools a recipe run drives (podman, openssl, kubectl, the documented blocks through bash): to their
/// end with their output captured, or in the background (the APNs simulator). Every running one is on a list
/// that SIGINT or SIGTERM stops; after such a signal no new one starts but for the clean-up's.
///
/// Started with posix_spawn and waited for with waitpid, their output into files: `podman run -d` leaves a
/// daemon (conmon) behind that inherits whatever the command was given, and neither a pipe nor Foundation's
/// `Process` (which learns of the end through a socket the child inherits) would see the command end while it
/// lives.
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
        let output = try Capture()
        let error = try Capture()
        var inputPipe: [Int32] = [-1, -1]
        if input != nil {
            guard pipe(&inputPipe) == 0 else { throw .check("cannot make a pipe") }
            // Only this thread starts processes: none can inherit the pipe before these.
            for end in inputPipe { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        }
        let pid: pid_t
        do {
            defer { if inputPipe[0] >= 0 { close(inputPipe[0]) } }
            pid = try spawn(
                executable, arguments, environment: environment, directory: directory, input: inputPipe[0],
                output: output.descriptor, error: error.descriptor)
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
        if let timeout {
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
                if live.contains(pid) { kill(pid, SIGKILL) }
            }
        }
        let status = wait(pid)
        return Finished(status: status, output: output.text(), error: error.text())
    }

    /// Runs `executable` and gives its standard output, trimmed; throws `failure` if it fails.
    static func output(
        _ executable: String, _ arguments: [String], else failure: String, environment: [String: String] = [:]
    ) throws(ContainerTestFailure) -> String {
        let finished = try run(executable, arguments, environment: environment)
        guard finished.succeeded else { throw .check(failure, detail: finished.tail(5)) }
        return finished.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A process left running (a server), its standard output and error into `log`; its PID.
    static func start(_ executable: String, _ arguments: [String], log: String) throws(ContainerTestFailure) -> pid_t {
        if interrupted { throw ContainerTestFailure(.interrupted, "interrupted") }
        let descriptor = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw .check("cannot write \(log)") }
        defer { close(descriptor) }
        return try spawn(
            executable, arguments, environment: [:], directory: nil, input: -1, output: descriptor, error: descriptor)
    }

    /// Stops a process `start` started, by its PID, and waits for it.
    static func stop(_ pid: pid_t) {
        kill(pid, SIGTERM)
        _ = wait(pid)
    }

    /// Waits for `pid` to end; its exit status (128 + the signal if one ended it).
    private static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        live.remove(pid)
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Starts `executable` with the given descriptors as its standard input (-1: /dev/null), output and error,
    /// in `directory`, with `environment` over this process's; no signal blocked, SIGPIPE at its default.
    private static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String], directory: String?, input: Int32,
        output: Int32, error: Int32
    ) throws(ContainerTestFailure) -> pid_t {
        guard let path = find(executable) else { throw .check("\(executable) is not installed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if input >= 0 {
            posix_spawn_file_actions_adddup2(&actions, input, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, error, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let variables = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
            .map { "\($0.key)=\($0.value)" }
        // In `directory` through `env -C` (glibc's posix_spawn_file_actions_addchdir_np is a GNU extension that
        // Swift does not see).
        let command = directory.map { ["/usr/bin/env", "-C", $0, path] } ?? [path]
        let argv = (command + arguments).map { strdup($0) } + [nil]
        let envp = variables.map { strdup($0) } + [nil]
        defer {
            for pointer in argv + envp { free(pointer) }
        }
        var pid: pid_t = 0
        // The list is locked while the child starts, so that a signal's handler never misses it.
        let status = live.adding { () -> (Int32, pid_t) in
            let status = posix_spawn(&pid, command[0], &actions, &attributes, argv, envp)
            return (status, status == 0 ? pid : 0)
        }
        guard status == 0 else { throw .check("cannot start \(executable)") }
        if interrupted && live.cleaningUp.pointee == 0 { kill(pid, SIGTERM) }
        return pid
    }

    /// A file a process writes into, unlinked at once: read back through its own descriptor.
    private final class Capture {
        let descriptor: Int32

        init() throws(ContainerTestFailure) {
            var template = Array("/tmp/duo-container-test-output-XXXXXX".utf8CString)
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
                ContainerProcesses.live.signalled.pointee = 1
                guard ContainerProcesses.live.cleaningUp.pointee == 0 else { return }
                let list = ContainerProcesses.live.pids
                for slot in 0..<ContainerProcesses.LiveList.capacity where list[slot] > 0 { kill(list[slot], SIGTERM) }
            }
        }
    }
}
