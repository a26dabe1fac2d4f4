import ErrorCodes
import Foundation
import RelayTestSupport

/// A throwaway `redis-server` for tests (Debian's package; `scripts/install-deps --test` installs
/// it): started on a free loopback port with `--save '' --appendonly no --requirepass`, nothing
/// kept on disk, stopped by its PID. ``restart()`` brings it back on the same port, empty.
public final class RedisServerProcess: @unchecked Sendable {
    // @unchecked Sendable: `process` is only replaced by start/stop, which a test calls from one task.
    public struct TLSFiles: Sendable {
        public var certificate: String
        public var key: String
        public var ca: String
        public init(certificate: String, key: String, ca: String) {
            self.certificate = certificate
            self.key = key
            self.ca = ca
        }
    }

    /// The server could not be started or reached (why, in words).
    public typealias Unavailable = ServerProcess.Unavailable

    public private(set) var port: UInt16 = 0
    public let password: String
    public let tls: TLSFiles?
    private let directory: URL
    private var process: Process?

    public static let executable = "/usr/bin/redis-server"
    public static let cli = "/usr/bin/redis-cli"

    /// Starts a server; with `tls`, it listens only on a TLS port.
    public init(password: String = "pw-" + UUID().uuidString.prefix(12), tls: TLSFiles? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw Unavailable(description: "redis-server is not installed: run scripts/install-deps --test")
        }
        self.password = password
        self.tls = tls
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("duo-redis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var lastProblem = "no port"
        for _ in 0..<20 {
            guard let candidate = try? freePort() else { continue }
            port = candidate
            do {
                try launch()
                return
            } catch {
                lastProblem = "\(error)"
            }
        }

        throw Unavailable(description: "redis-server did not start: \(lastProblem)")
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    private func launch() throws {
        var arguments = [
            "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--requirepass", password,
            "--dir", directory.path, "--daemonize", "no", "--loglevel", "warning",
        ]
        if let tls {
            arguments += [
                "--port", "0", "--tls-port", String(port), "--tls-cert-file", tls.certificate, "--tls-key-file",
                tls.key, "--tls-ca-cert-file", tls.ca, "--tls-auth-clients", "no",
            ]
        } else {
            arguments += ["--port", String(port)]
        }
        process = try ServerProcess.run(Self.executable, arguments, listeningOn: port, name: "redis-server")
    }

    /// Stops the server (SIGKILL to its PID) and waits for it to exit.
    public func stop() {
        ServerProcess.stop(process)
        process = nil
    }

    /// Starts it again on the same port (with nothing of the previous state).
    public func restart() throws {
        stop()
        try ServerProcess.relaunch(launch)
    }

    public var isRunning: Bool { process?.isRunning ?? false }

    /// Runs `redis-cli` against this server and returns its standard output.
    @discardableResult
    public func command(_ arguments: String...) throws -> String {
        try command(arguments)
    }

    public func command(_ arguments: [String]) throws -> String {
        try Self.cli(port: port, password: password, tls: tls, arguments)
    }

    /// Runs `redis-cli` against 127.0.0.1:`port` (with `password`, and TLS when given) and returns its standard output.
    static func cli(port: UInt16, password: String?, tls: TLSFiles? = nil, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: cli)
        var all = ["-h", "127.0.0.1", "-p", String(port), "--no-auth-warning"]
        if let password { all += ["-a", password] }
        if let tls { all += ["--tls", "--cacert", tls.ca] }
        process.arguments = all + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// Every key in the server (`SCAN`), with its remaining time to live in milliseconds (-1: none).
    public func keysWithTTL() throws -> [(key: String, ttl: Int)] {
        let keys = try command("--scan").split(separator: "\n").map(String.init)
        return try keys.map { key in
            (key, Int(try command("PTTL", key).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -3)
        }
    }
}
