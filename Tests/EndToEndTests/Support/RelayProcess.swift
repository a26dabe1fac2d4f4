import Foundation
import RelayCore
import RelayCrypto
import RelayTestSupport
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
    /// Whether the launcher ran without the binary (a shell): its output is not the relay's.
    private let directRun: Bool
    private(set) var port: UInt16 = 0
    private let output = OutputBuffer()
    /// The format the relay was configured to write its log in, when this object wrote its configuration.
    private(set) var configuredLogFormat: LogLine.Format? = nil
    var logFormat: LogLine.Format { configuredLogFormat ?? .text }

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
    /// - Parameters:
    ///   - launcher: a command that runs the binary (`setpriv … --`), given before it; none by default.
    ///   - direct: run `launcher` with `arguments` alone, without the binary (a shell running a printed command).
    init(
        arguments: [String], environment: [String: String], directory: URL? = nil, launcher: [String] = [],
        direct: Bool = false
    ) throws {
        self.directory = try directory ?? Self.temporaryDirectory()
        directRun = direct
        if let first = launcher.first {
            process.executableURL = URL(fileURLWithPath: first)
            process.arguments = launcher.dropFirst() + (direct ? [] : [Self.binary.path]) + arguments
        } else {
            process.executableURL = Self.binary
            process.arguments = arguments
        }
        process.environment = Self.childEnvironment(environment)
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        output.collect(out.fileHandleForReading, into: \.stdout, closed: \.stdoutClosed)
        output.collect(err.fileHandleForReading, into: \.stderr, closed: \.stderrClosed)
    }

    /// Starts `duo-relay serve` with `config` (JSON text, `listen` defaulting to an ephemeral
    /// loopback port) and waits until it says where it listens.
    ///
    /// `logFormat` (default: `DUO_RELAY_TEST_LOG_FORMAT` in the test's environment, else text) is added to the
    /// configuration as `log.format` when it sets none, so that every end-to-end test runs in either format; its
    /// lines are checked when the relay is gone (``logLineProblems``).
    convenience init(
        config: String, secrets: TestSecrets, extraEnvironment: [String: String] = [:], launcher: [String] = [],
        logFormat: LogLine.Format? = nil
    ) throws {
        let directory = try Self.temporaryDirectory()
        let path = directory.appendingPathComponent("relay.json").path
        let format = logFormat ?? Self.logFormatUnderTest
        let written = Self.config(config, logFormat: format)
        try written.write(toFile: path, atomically: true, encoding: .utf8)
        // Readable by a launcher's other user too (the file holds no secret).
        chmod(path, 0o644)
        try self.init(
            arguments: ["serve", "--config", path],
            environment: secrets.environment.merging(extraEnvironment) { _, new in new }, directory: directory,
            launcher: launcher)
        configuredLogFormat = written.contains(#""log":{"format":"json"}"#) ? .json : .text
        try waitForPort()
    }

    /// The log format the end-to-end tests run their relays with: `DUO_RELAY_TEST_LOG_FORMAT` (`text` or `json`).
    static var logFormatUnderTest: LogLine.Format {
        ProcessInfo.processInfo.environment["DUO_RELAY_TEST_LOG_FORMAT"].flatMap(LogLine.Format.init) ?? .text
    }

    /// `config` with `"log":{"format":…}` added when it has no `log` key and `format` is json.
    static func config(_ config: String, logFormat format: LogLine.Format) -> String {
        guard format == .json, !config.contains(#""log":"#), let brace = config.firstIndex(of: "{") else {
            return config
        }
        return String(config[...brace]) + #""log":{"format":"json"},"# + String(config[config.index(after: brace)...])
    }

    var standardOutput: String { output.state.withLock { String(decoding: $0.stdout, as: UTF8.self) } }
    /// Standard error as printed.
    var rawStandardError: String { output.state.withLock { String(decoding: $0.stderr, as: UTF8.self) } }

    /// Standard error as a person reads it: a JSON log's lines in the text format (time, level, `duo-relay:`,
    /// the message), so that what a test looks for is found in either format; the raw bytes are checked on their
    /// own (``logLineProblems``).
    var standardError: String {
        let raw = rawStandardError
        guard logFormat == .json else { return raw }
        return raw.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            LogLine.parse(line).map { $0.rendered(.text) } ?? String(line)
        }.joined(separator: "\n")
    }

    /// The message of each log line on standard error (without time, level and prefix), in order; a line that is
    /// not a log line as it stands.
    var logMessages: [String] { Self.logMessages(rawStandardError) }

    static func logMessages(_ text: String) -> [String] {
        text.split(separator: "\n").map { LogLine.parse($0)?.message ?? String($0) }
    }

    /// Commands whose standard error is a log (docs/operations/monitoring.md, "Logs"): the long-running ones, and
    /// `check`, which runs before them (in a unit's `ExecStartPre`, its lines go to the same journal).
    static let loggingCommands: Set<String> = ["serve", "dev", "apns-sim", "check"]

    /// What is wrong with the child's log lines: every line on standard error of a logging command (not one
    /// that stopped at a usage error, whose usage is no log line) must parse as a log line (``LogLine/parse(_:)``)
    /// in its configured format, with one `duo-relay` prefix. Empty when there is nothing to check.
    var logLineProblems: [String] {
        guard !directRun, let command = process.arguments?.first, Self.loggingCommands.contains(command),
            process.isRunning || process.terminationStatus != 64
        else { return [] }
        return Self.logLineProblems(rawStandardError, format: configuredLogFormat)
    }

    /// Problems of `text` as a log in `format` (up to a sanitizer's report, which is not the relay's).
    static func logLineProblems(_ text: String, format: LogLine.Format?) -> [String] {
        var text = Substring(text)
        if let start = sanitizerMarkers.compactMap({ text.range(of: $0)?.lowerBound }).min() {
            text = text[..<start]
        }
        var problems: [String] = []
        for line in text.split(separator: "\n") {
            guard LogLine.parse(line) != nil else {
                problems.append("not a log line: \(line.prefix(200))")
                continue
            }
            if let format, (format == .json) != line.hasPrefix("{") {
                problems.append("not in the \(format) format: \(line.prefix(200))")
            }
        }
        return problems
    }
    var allOutput: String { standardOutput + standardError }

    /// The port in the relay's `listening on <address>:<port>` line (an IPv6 address has colons too).
    func waitForPort() throws {
        let listening = try Poll.value(within: .seconds(30)) { () throws -> UInt16? in
            let exited = !process.isRunning
            let text = standardError
            if let range = text.range(of: "listening on ") {
                let line = text[range.upperBound...].prefix { $0 != "\n" }
                if line.endIndex < text.endIndex, let colon = line.lastIndex(of: ":") {
                    return UInt16(line[line.index(after: colon)...])
                }
            }
            if exited { throw TestFailure("relay exited (\(process.terminationStatus)): \(text)") }
            return nil
        }
        guard let listening else { throw TestFailure("relay did not start: \(standardError)") }
        port = listening
    }

    /// The port printed right after `marker` on either output, once it has been printed (within `timeout`).
    func printedPort(after marker: String, within timeout: Duration = .seconds(30)) -> UInt16? {
        Poll.value(within: timeout) { Self.port(after: marker, in: allOutput) }
    }

    /// The digits right after `marker` in `text`, as a port.
    static func port(after marker: String, in text: String) -> UInt16? {
        guard let range = text.range(of: marker) else { return nil }
        return UInt16(text[range.upperBound...].prefix { $0.isNumber })
    }

    /// Waits for the process to exit and returns its status, once everything it printed has been read.
    func waitForExit(timeoutSeconds: Double = 30) throws -> Int32 {
        try Poll.wait(for: "duo-relay \(process.arguments?.first ?? "") exited", within: .seconds(timeoutSeconds)) {
            !process.isRunning
        }
        // At once now; it also drops the run loop source by which Foundation's Process holds itself (without it, the
        // Process and all it refers to are never freed).
        process.waitUntilExit()
        waitForOutputToEnd()
        return process.terminationStatus
    }

    /// Whether both pipes have reached end of file: the child, and everything it started, closed them.
    var outputHasEnded: Bool { output.state.withLock { $0.stdoutClosed && $0.stderrClosed } }

    /// Waits (up to 10 s) until both pipes have reached end of file: everything the child printed, up to a
    /// sanitizer's report at exit, has been collected. That is at once when the child has exited (its
    /// pipes close with it), unless something it started still holds them.
    private func waitForOutputToEnd() {
        Poll.until(within: .seconds(10), every: .milliseconds(5)) { outputHasEnded }
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

    func connect() throws -> RawHTTPClient { try RawHTTPClient(port: port) }

    /// The relay's `/metrics` text, from its metrics listener (`metrics_listen`, the port its start-up line names).
    func scrapeMetrics() throws -> String {
        let port = try #require(printedPort(after: "metrics on http://127.0.0.1:"))
        return try RawHTTPClient(port: port).request("GET", "/metrics").text
    }

    /// The value of one sample line (`name{labels}`) in a scrape.
    static func sample(_ text: String, _ series: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap {
            Double($0.split(separator: " ").last ?? "")
        }
    }

    /// Stops the child if it still runs, and fails the current test if the child reported a sanitizer finding
    /// (a sanitized relay reports to its standard error, where nothing else would notice it).
    deinit {
        if process.isRunning { process.terminate() }
        // Also when it has exited: waiting drops the run loop source by which Foundation's Process holds itself.
        if process.processIdentifier != 0 { process.waitUntilExit() }
        waitForOutputToEnd()
        if let report = sanitizerReport {
            Issue.record("duo-relay \(process.arguments?.first ?? "") reported a sanitizer finding:\n\(report)")
        }
        // Every line a logging command printed, in every end-to-end test, is a log line of its format.
        let problems = logLineProblems
        if !problems.isEmpty {
            let listed = problems.prefix(10).joined(separator: "\n")
            Issue.record("duo-relay \(process.arguments?.first ?? "") printed lines that are not log lines:\n\(listed)")
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

    /// Reads `handle` to its end on a thread of its own, appending to `text` as bytes come, then marks
    /// `closed`. A blocking read sees end of file reliably: Foundation's `readabilityHandler` does not
    /// call again for it when the last bytes and the end of file arrive together (a short command that
    /// prints and exits), which left the end unseen until a 10-second wait gave up.
    func collect(
        _ handle: FileHandle, into text: WritableKeyPath<State, [UInt8]> & Sendable,
        closed: WritableKeyPath<State, Bool> & Sendable
    ) {
        let thread = Thread { [self] in
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(handle.fileDescriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                state.withLock { $0[keyPath: text].append(contentsOf: chunk[..<count]) }
            }
            state.withLock { $0[keyPath: closed] = true }
        }
        thread.name = "duo-relay output"
        thread.start()
    }
}
