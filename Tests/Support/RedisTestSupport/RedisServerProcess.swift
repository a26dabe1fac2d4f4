import ErrorCodes
import Foundation

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
    public struct Unavailable: CodedError {
        public let description: String
        public var code: ErrorCode<Unavailable> { ErrorCode("unavailable") }
        public var reason: String { description }
    }

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
            let candidate = UInt16.random(in: 20_000...60_000)
            guard Self.portIsFree(candidate) else { continue }
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
        process = try Self.run(Self.executable, arguments, listeningOn: port, name: "redis-server") { "" }
    }

    /// Runs `executable` with `arguments` and waits until it listens on `port`; one that exits or never listens is
    /// stopped and reported as ``Unavailable`` (with what `log` says then, for a process that writes one).
    static func run(
        _ executable: String, _ arguments: [String], listeningOn port: UInt16, name: String, log: () -> String
    ) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        guard waitUntilListening(process, port: port) else {
            guard process.isRunning else {
                let said = log()
                throw Unavailable(
                    description: "\(name) exited with \(process.terminationStatus)" + (said.isEmpty ? "" : ": " + said))
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw Unavailable(description: "\(name) did not listen on \(port)")
        }
        return process
    }

    /// Waits (at most 10 s) until `process` takes connections on `port`; false when it exited or never did.
    static func waitUntilListening(_ process: Process, port: UInt16) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            guard process.isRunning else { return false }
            if accepts(port) { return true }
            // A pace: a server starts within milliseconds; checking ten times as often would only spin.
            usleep(10_000)
        }
        return false
    }

    /// Stops the server (SIGKILL to its PID) and waits for it to exit.
    public func stop() {
        guard let process else { return }
        self.process = nil
        guard process.isRunning else { return }
        // SIGKILL: the child inherits the test thread's signal mask, in which SIGTERM may be blocked, and a
        // throwaway server has nothing to save (an abrupt end is also what a crash looks like to the relay).
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Starts it again on the same port (with nothing of the previous state).
    public func restart() throws {
        stop()
        let deadline = Date().addingTimeInterval(10)
        while true {
            do {
                try launch()
                return
            } catch {
                // The port may linger for a moment after the old process is gone.
                if Date() > deadline { throw error }
                usleep(50_000)
            }
        }
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

    static func portIsFree(_ port: UInt16) -> Bool {
        withLoopbackSocket(port) { descriptor, address, length in bind(descriptor, address, length) == 0 }
    }

    static func accepts(_ port: UInt16) -> Bool {
        withLoopbackSocket(port) { descriptor, address, length in connect(descriptor, address, length) == 0 }
    }

    /// A fresh TCP socket and 127.0.0.1:`port` for `body`; the socket is closed afterwards.
    private static func withLoopbackSocket(
        _ port: UInt16, _ body: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Bool
    ) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                body(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }
}
