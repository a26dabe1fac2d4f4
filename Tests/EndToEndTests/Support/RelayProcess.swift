import Foundation
import RelayCrypto
import Synchronization
import Testing

/// Secrets for one test relay: a throwaway APNs key per environment and relay keys.
struct TestSecrets: Sendable {
    var apnsKey = P256.Signing.PrivateKey()
    var keyID = "TESTKEY001"
    var teamID = "TESTTEAM01"
    var relayKeys: [UInt8: [UInt8]] = [1: SecureRandom.bytes(count: 32)]
    var environments: [String] = ["SANDBOX"]

    var relayKeysJSON: String {
        "{"
            + relayKeys.sorted { $0.key < $1.key }.map { #""\#($0.key)":"\#(Base64.urlEncode($0.value))""# }
            .joined(separator: ",") + "}"
    }

    var environment: [String: String] {
        var env = ["APNS_TEAM_ID": teamID, "RELAY_KEYS": relayKeysJSON]
        for name in environments {
            env["APNS_KEY_" + name] = apnsKey.pemRepresentation
            env["APNS_KEY_ID_" + name] = keyID
        }
        return env
    }

    /// Every secret string a privacy check must never find in the relay's output.
    var secretStrings: [String] {
        [apnsKey.pemRepresentation, relayKeysJSON] + relayKeys.values.map { Base64.urlEncode($0) }
            + apnsKey.pemRepresentation.split(separator: "\n").filter { $0.count > 20 }.map(String.init)
    }
}

/// The real `duo-relay` binary, run as a child process on a loopback port.
final class RelayProcess: @unchecked Sendable {
    // @unchecked: the Process is only touched by the test that owns this object; output
    // collection happens behind `output`'s Mutex.
    let process = Process()
    let directory: URL
    private(set) var port: UInt16 = 0
    private let output = OutputBuffer()

    /// The binary beside the test bundle (both are products of the same build).
    static var binary: URL {
        if let path = ProcessInfo.processInfo.environment["DUO_RELAY_BINARY"] { return URL(fileURLWithPath: path) }
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        while url.path != "/" && !url.lastPathComponent.hasSuffix(".xctest") { url.deleteLastPathComponent() }
        return url.deletingLastPathComponent().appendingPathComponent("duo-relay")
    }

    /// Makes a temporary directory for a test's files.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("duo-relay-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Sanitizer settings passed on to the child, so that a sanitized relay (scripts/sanitize builds it too)
    /// runs with the same options, suppressions and reporting as the test process (`LD_PRELOAD`: the
    /// ThreadSanitizer annotations for Mutex, see scripts/tsan-mutex-annotations.c).
    static let sanitizerVariables = ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "SWIFT_BACKTRACE", "LD_PRELOAD"]

    /// `environment` plus `PATH` and the test process's sanitizer settings (unless `environment` sets them).
    static func childEnvironment(_ environment: [String: String]) -> [String: String] {
        var childEnvironment = environment.merging(["PATH": "/usr/bin:/bin"]) { a, _ in a }
        let own = ProcessInfo.processInfo.environment
        for name in sanitizerVariables where childEnvironment[name] == nil {
            childEnvironment[name] = own[name]
        }
        return childEnvironment
    }

    /// Starts `duo-relay <arguments>` with exactly `environment` (plus `PATH` and any sanitizer settings of the
    /// test process), without waiting for anything.
    init(arguments: [String], environment: [String: String], directory: URL? = nil) throws {
        self.directory = try directory ?? Self.temporaryDirectory()
        process.executableURL = Self.binary
        process.arguments = arguments
        process.environment = Self.childEnvironment(environment)
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        out.fileHandleForReading.readabilityHandler = { [output] handle in
            let data = handle.availableData
            output.state.withLock { state in
                if data.isEmpty { state.stdoutClosed = true } else { state.stdout.append(contentsOf: data) }
            }
            if data.isEmpty { handle.readabilityHandler = nil }
        }
        err.fileHandleForReading.readabilityHandler = { [output] handle in
            let data = handle.availableData
            output.state.withLock { state in
                if data.isEmpty { state.stderrClosed = true } else { state.stderr.append(contentsOf: data) }
            }
            if data.isEmpty { handle.readabilityHandler = nil }
        }
        try process.run()
    }

    /// Starts `duo-relay serve` with `config` (JSON text, `listen` defaulting to an ephemeral
    /// loopback port) and waits until it says where it listens.
    convenience init(config: String, secrets: TestSecrets, extraEnvironment: [String: String] = [:]) throws {
        let directory = try Self.temporaryDirectory()
        let path = directory.appendingPathComponent("relay.json").path
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        try self.init(
            arguments: ["serve", "--config", path],
            environment: secrets.environment.merging(extraEnvironment) { _, new in new }, directory: directory)
        try waitForPort()
    }

    var standardOutput: String { output.state.withLock { String(decoding: $0.stdout, as: UTF8.self) } }
    var standardError: String { output.state.withLock { String(decoding: $0.stderr, as: UTF8.self) } }
    var allOutput: String { standardOutput + standardError }

    private func waitForPort() throws {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let range = standardError.range(of: "listening on ") {
                let rest = standardError[range.upperBound...].prefix { $0 != "\n" }
                if let colon = rest.lastIndex(of: ":"), let port = UInt16(rest[rest.index(after: colon)...]) {
                    self.port = port
                    return
                }
            }
            if !process.isRunning {
                throw TestFailure("relay exited (\(process.terminationStatus)): \(standardError)")
            }
            usleep(20_000)
        }
        throw TestFailure("relay did not start: \(standardError)")
    }

    /// Waits for the process to exit and returns its status.
    func waitForExit(timeoutSeconds: Double = 30) throws -> Int32 {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while process.isRunning {
            guard Date() < deadline else { throw TestFailure("process did not exit") }
            usleep(10_000)
        }
        waitForOutputToEnd()
        return process.terminationStatus
    }

    /// Waits (up to 10 s) until both pipes have reached end of file: everything the child printed, up to a
    /// sanitizer's report at exit, has been collected.
    private func waitForOutputToEnd() {
        let deadline = Date().addingTimeInterval(10)
        while !output.state.withLock({ $0.stdoutClosed && $0.stderrClosed }) && Date() < deadline {
            usleep(5_000)
        }
    }

    /// Lines by which AddressSanitizer, LeakSanitizer and ThreadSanitizer start their reports.
    static let sanitizerMarkers = [
        "WARNING: ThreadSanitizer", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "ERROR: ThreadSanitizer",
    ]

    /// The child's standard error from the first sanitizer report on, if it printed one.
    var sanitizerReport: String? {
        let text = standardError
        guard let start = Self.sanitizerMarkers.compactMap({ text.range(of: $0)?.lowerBound }).min() else {
            return nil
        }
        return String(text[start...].prefix(20_000))
    }

    func signal(_ number: Int32) {
        kill(process.processIdentifier, number)
    }

    func connect() throws -> TestConnection { try TestConnection(port: port) }

    /// Stops the child if it still runs, and fails the current test if the child reported a sanitizer finding
    /// (a sanitized relay reports to its standard error, where nothing else would notice it).
    deinit {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        waitForOutputToEnd()
        if let report = sanitizerReport {
            Issue.record("duo-relay \(process.arguments?.first ?? "") reported a sanitizer finding:\n\(report)")
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// A configuration file's text for a loopback test relay.
    static func config(
        topic: String = "app.openduo.pocket", extra: String = "", apns: String = ""
    ) -> String {
        """
        {"listen":"127.0.0.1:0","apns":{"topic":"\(topic)"\(apns.isEmpty ? "" : "," + apns)}\
        \(extra.isEmpty ? "" : "," + extra)}
        """
    }
}

/// What a child process has printed so far, filled from pipe handlers on other threads.
final class OutputBuffer: Sendable {
    struct State {
        var stdout: [UInt8] = []
        var stderr: [UInt8] = []
        /// Whether the pipe has reached end of file (the child and everything it started have closed it).
        var stdoutClosed = false
        var stderrClosed = false
    }

    let state = Mutex(State())
}
