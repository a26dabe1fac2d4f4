import Foundation
import RelayTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The real `duo-relay serve` started as systemd starts a service with a socket unit: the listening socket, which the
/// test holds as the service manager would, on descriptor 3, `LISTEN_PID` naming the process and `LISTEN_FDS=1`
/// (through `sh`, which learns its own PID and then becomes the relay).
///
/// Started with posix_spawn: Foundation's `Process` closes every descriptor but the standard three in the child.
/// Its standard output and error go into one file.
final class ActivatedRelay {
    let pid: pid_t
    let logPath: String
    private var exitStatus: Int32?

    /// Starts `binary serve --config configPath` with exactly `environment` (plus `PATH` and the sanitizer settings),
    /// with `socket` on descriptor 3.
    init(binary: String, configPath: String, environment: [String: String], socket: Int32, logPath: String) throws {
        self.logPath = logPath
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // dup2 to another number clears close-on-exec on descriptor 3 (the caller's socket is not 3 itself).
        precondition(socket != 3)
        posix_spawn_file_actions_adddup2(&actions, socket, 3)
        let script = #"export LISTEN_PID=$$ LISTEN_FDS=1; exec "$0" "$@""#
        let arguments = ["/bin/sh", "-c", script, binary, "serve", "--config", configPath]
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = RelayProcess.childEnvironment(environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, "/bin/sh", &actions, nil, argv, envp)
        guard result == 0 else { throw TestFailure("duo-relay did not start (errno \(result))") }
        self.pid = pid
    }

    /// What it has printed so far.
    var output: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Waits until it says it listens (it has taken the socket and serves), or fails if it exits first.
    func waitUntilServing(within timeout: Duration = .seconds(30)) throws {
        let serving = try Poll.value(within: timeout) { () throws -> Bool? in
            if output.contains("listening on ") { return true }
            if hasExited { throw TestFailure("the relay exited (\(exitStatus ?? -1)): \(output)") }
            return nil
        }
        guard serving == true else { throw TestFailure("the relay did not start serving: \(output)") }
    }

    func signal(_ number: Int32) { kill(pid, number) }

    /// Whether it has exited (reaped here once it has).
    var hasExited: Bool {
        if exitStatus != nil { return true }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return false }
        // WIFEXITED: the low seven bits are 0; WEXITSTATUS: the next eight; else 128 + the signal.
        exitStatus = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + status & 0x7f
        return true
    }

    /// Its exit status, once it has exited (at most `timeout`).
    func waitForExit(within timeout: Duration = .seconds(30)) throws -> Int32 {
        try Poll.wait(for: "duo-relay \(pid) exited", within: timeout) { hasExited }
        return exitStatus ?? -1
    }

    deinit {
        if !hasExited {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }
}
