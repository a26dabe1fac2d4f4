import Foundation
import Glibc

/// A process the doc test starts (a documented block in bash, the simulator, a tool), with its output in files,
/// started with posix_spawn and waited for by its PID. (Not Foundation's Process: it learns that a child ended
/// when a socket the child inherited closes, and a block that leaves a server in the background passes that
/// socket on, so that the block's shell would never be seen to end.) The child gets standard input from
/// /dev/null, no blocked signal and every signal's default action (the descriptors this program opens are
/// close-on-exec).
/// Whatever still runs at the end goes with the run's PID namespace.
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

    let pid: pid_t
    private var exitStatus: Int32?

    /// Starts `executable` (a path, or a name looked up in PATH).
    init(
        _ executable: String, _ arguments: [String], directory: String? = nil, environment: [String: String] = [:],
        output: Sink, error: Sink = .output
    ) throws {
        pid = try Self.spawn(
            executable, arguments, directory: directory, environment: environment, output: output, error: error)
    }

    /// Whether the process runs (it has not ended; once it has, it is reaped here).
    var isRunning: Bool {
        guard exitStatus == nil else { return false }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid { exitStatus = Self.decode(status) }
        return result == 0
    }

    /// Waits for the process to exit; its exit status (128 + the signal if a signal ended it).
    @discardableResult
    func wait() -> Int32 {
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { return 127 }
        }
        let decoded = Self.decode(status)
        exitStatus = decoded
        return decoded
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
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { return (127, "no pipe") }
        // Neither end is passed on to a later child (this one gets the write end as its output).
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let pid: pid_t
        do {
            pid = try spawn(
                executable, arguments, directory: directory, environment: environment, output: .discard,
                error: withError ? .output : nil, outputDescriptor: ends[1])
        } catch {
            close(ends[0])
            close(ends[1])
            return (127, "\(executable) did not start")
        }
        close(ends[1])
        var text: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(ends[0], $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            text += buffer[..<count]
        }
        close(ends[0])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        return (decode(status), String(decoding: text, as: UTF8.self))
    }

    /// `name`'s path: itself if it holds a slash, else the first executable of that name in PATH.
    static func find(_ name: String, path: String? = nil) -> String? {
        if name.contains("/") { return name }
        let path = path ?? ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }

    private static func decode(_ status: Int32) -> Int32 {
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (they are macros).
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Spawns `executable`; standard error to `error`, or (nil) this process's own.
    private static func spawn(
        _ executable: String, _ arguments: [String], directory: String?, environment: [String: String],
        output: Sink, error: Sink?, outputDescriptor: Int32? = nil
    ) throws -> pid_t {
        let merged = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        guard let path = find(executable, path: merged["PATH"]) else {
            throw DocTestFailure(scenario: "doc-test", what: "\(executable) is not installed")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let outputDescriptor {
            posix_spawn_file_actions_adddup2(&actions, outputDescriptor, 1)
        } else {
            add(output, as: 1, to: &actions)
        }
        switch error {
        case .none: break
        case .output: posix_spawn_file_actions_adddup2(&actions, 1, 2)
        case .some(let sink): add(sink, as: 2, to: &actions)
        }
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
        let result = posix_spawn(&pid, command[0], &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw DocTestFailure(scenario: "doc-test", what: "\(executable) did not start (errno \(result))")
        }
        return pid
    }

    private static func add(_ sink: Sink, as descriptor: Int32, to actions: inout posix_spawn_file_actions_t) {
        switch sink {
        case .discard, .output:
            posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", O_WRONLY, 0)
        case .file(let path):
            posix_spawn_file_actions_addopen(&actions, descriptor, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        case .append(let path):
            posix_spawn_file_actions_addopen(&actions, descriptor, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        }
    }
}
