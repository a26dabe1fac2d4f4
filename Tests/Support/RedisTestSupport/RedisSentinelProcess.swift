import Foundation
import RelayTestSupport

/// A throwaway `redis-sentinel` for tests (Debian's package; `scripts/install-deps --test` installs it): one
/// sentinel on a loopback port, monitoring one primary under a name, with a short `down-after-milliseconds` so that
/// a killed primary is replaced within seconds. It rewrites its configuration file, so it gets a copy of its own in
/// a directory of its own; stopped by its PID.
public final class RedisSentinelProcess: @unchecked Sendable {
    // @unchecked Sendable: `process` is only replaced by start/stop, which a test calls from one task.
    public let port: UInt16
    public let master: String
    /// The sentinel's own AUTH password (`requirepass`); nil: none.
    public let password: String?
    private let directory: URL
    private let configuration: String
    private var process: Process?

    public static let executable = "/usr/bin/redis-sentinel"

    /// Whether `redis-sentinel` is installed (a test that needs it says why it cannot run otherwise).
    public static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: executable) }

    /// A sentinel monitoring `primary` (its `requirepass` as `auth-pass`) under `master`; with `start` false it is
    /// made but not started (``start()`` later, on the same port: sentinels unreachable at first).
    /// `downAfterMilliseconds`: how long the primary must be silent before it is replaced (the outage a kill makes).
    public init(
        monitoring primary: RedisServerProcess, master: String = "duo-limits", password: String? = nil,
        start: Bool = true, downAfterMilliseconds: Int = 1_000
    ) throws {
        guard Self.isInstalled else {
            throw ServerProcess.Unavailable(
                description: "redis-sentinel is not installed: run scripts/install-deps --test")
        }
        self.master = master
        self.password = password
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("duo-sentinel-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        guard let chosen = try? freePort() else {
            throw ServerProcess.Unavailable(description: "no free port for a sentinel")
        }
        port = chosen
        var lines = [
            "port \(chosen)", "bind 127.0.0.1", "dir \(directory.path)", "daemonize no",
            "logfile \(directory.appendingPathComponent("sentinel.log").path)",
            "sentinel monitor \(master) 127.0.0.1 \(primary.port) 1",
            "sentinel auth-pass \(master) \(primary.password)",
            "sentinel down-after-milliseconds \(master) \(downAfterMilliseconds)",
            "sentinel failover-timeout \(master) 5000",
        ]
        if let password { lines.append("requirepass \(password)") }
        configuration = lines.joined(separator: "\n") + "\n"
        if start { try self.start() }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts the sentinel (with its configuration as written at first) and waits until it listens.
    public func start() throws {
        let file = directory.appendingPathComponent("sentinel.conf")
        try configuration.write(to: file, atomically: true, encoding: .utf8)
        process = try ServerProcess.run(
            Self.executable, [file.path], listeningOn: port, name: "redis-sentinel", log: { [self] in log })
    }

    /// Stops the sentinel (SIGKILL to its PID) and waits for it to exit.
    public func stop() {
        ServerProcess.stop(process)
        process = nil
    }

    /// Runs `redis-cli` against this sentinel (`SENTINEL FAILOVER duo-limits`, ...) and returns its standard output.
    @discardableResult
    public func command(_ arguments: String...) throws -> String {
        try RedisServerProcess.cli(port: port, password: password, arguments)
    }

    /// The sentinel's log so far (`+slave`, `+switch-master`, `+convert-to-slave`, ...).
    public var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("sentinel.log"), encoding: .utf8)) ?? ""
    }

}
