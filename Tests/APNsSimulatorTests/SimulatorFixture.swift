import APNsSimulator
import Foundation
import RelayCore
import RelayCrypto
import RelayTestSupport
import Testing

/// A running simulator with throwaway PKI and provider key, plus helpers to drive it with the
/// command-line HTTP/2 clients (curl, nghttp, h2load).
final class SimulatorFixture: Sendable {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let topic = "org.openduo.pocket"
    static let deviceToken = String(repeating: "0123456789abcdef", count: 4)
    static let payload = #"{"aps":{"alert":{"loc-key":"NEW"},"mutable-content":1},"sealed":"AAAA"}"#

    let simulator: APNsSimulator
    let signingKey: P256.Signing.PrivateKey
    let directory: URL
    let caFile: String
    /// The simulator's clock for `iat` checks, from now on.
    let clock: ManualClock

    init(
        maxConcurrentStreams: UInt32 = 1000, initialMaxConcurrentStreams: UInt32 = 1, recordFile: Bool = false,
        onDeliver: (@Sendable (DeliveredNotification) -> Void)? = nil, retainedDeliveries: Int = 10_000,
        tokenFaults: [TokenFault] = [], host: String = "127.0.0.1", goawayReason: String? = nil,
        responder: (@Sendable (SimulatorRequest) -> SimulatorResponse)? = nil
    ) throws {
        signingKey = P256.Signing.PrivateKey()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-sim-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let pki = TestPKI.shared
        caFile = pki.caFile
        let clock = ManualClock(unixSeconds: UInt64(Date().timeIntervalSince1970))
        self.clock = clock
        var configuration = SimulatorConfiguration(
            certificatePEM: pki.pem.certificatePEM, privateKeyPEM: pki.pem.privateKeyPEM, teamID: Self.teamID,
            keys: [Self.keyID: signingKey.publicKey], topics: [Self.topic])
        configuration.maxConcurrentStreams = maxConcurrentStreams
        configuration.initialMaxConcurrentStreams = initialMaxConcurrentStreams
        configuration.now = { Date(timeIntervalSince1970: TimeInterval(clock.unixSeconds)) }
        configuration.onDeliver = onDeliver
        configuration.retainedDeliveries = retainedDeliveries
        configuration.tokenFaults = tokenFaults
        configuration.host = host
        configuration.goawayReason = goawayReason
        configuration.responder = responder
        if recordFile { configuration.recordFile = directory.appendingPathComponent("record.jsonl").path }
        simulator = try APNsSimulator(configuration: configuration)
    }

    deinit {
        simulator.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    var recordPath: String { directory.appendingPathComponent("record.jsonl").path }

    var baseURL: String { "https://127.0.0.1:\(simulator.port)" }

    func url(token: String = SimulatorFixture.deviceToken) -> String { "\(baseURL)/3/device/\(token)" }

    /// A provider token; `claims` overrides the claims JSON, `key` the signing key.
    func providerToken(
        issuedAt: Int64? = nil, keyID: String = SimulatorFixture.keyID, claims: String? = nil,
        key: P256.Signing.PrivateKey? = nil
    ) throws -> String {
        let iat = issuedAt ?? Int64(clock.unixSeconds)
        let claimsJSON = claims ?? #"{"iss":"\#(Self.teamID)","iat":\#(iat)}"#
        return try JWT.signES256(
            header: #"{"alg":"ES256","kid":"\#(keyID)"}"#, claims: claimsJSON, using: key ?? signingKey)
    }

    /// The standard APNs headers for a push with `token`, as curl/nghttp `-H` arguments; `extra`
    /// headers replace standard ones of the same name.
    func headers(token: String, extra: [String] = []) -> [String] {
        let standard = [
            "authorization: bearer \(token)", "apns-topic: \(Self.topic)", "apns-push-type: alert",
            "apns-priority: 10",
        ]
        let replaced = Set(extra.map(Self.headerName))
        return standard.filter { !replaced.contains(Self.headerName($0)) } + extra
    }

    static func headerName(_ header: String) -> String {
        String(header.prefix { $0 != ":" }).lowercased()
    }

    func writeFile(_ name: String, _ contents: String) throws -> String {
        let path = directory.appendingPathComponent(name).path
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// One curl request; headers that are replaced by `extra` keep curl's "name:" removal syntax.
    struct CurlResult {
        let exitCode: Int32
        let status: Int
        let headers: [String: String]
        let body: String
        /// curl's own messages (`-sS`: errors only).
        let stderr: String
    }

    func curl(
        _ url: String? = nil, method: String = "POST", headers: [String], payload: String? = SimulatorFixture.payload,
        maxTime: Double = 10
    ) async throws -> CurlResult {
        let id = UUID().uuidString
        let headerFile = directory.appendingPathComponent("h-\(id)").path
        let bodyFile = directory.appendingPathComponent("b-\(id)").path
        var arguments = [
            "-sS", "--http2", "--cacert", caFile, "-X", method, "-D", headerFile, "-o", bodyFile, "-w",
            "%{http_code}", "--max-time", String(maxTime),
        ]
        for header in headers { arguments += ["-H", header] }
        if let payload { arguments += ["--data-binary", "@" + (try writeFile("p-\(id)", payload))] }
        arguments.append(url ?? self.url())
        let result = try await run("/usr/bin/curl", arguments)
        let headerText = (try? String(contentsOfFile: headerFile, encoding: .utf8)) ?? ""
        var parsed: [String: String] = [:]
        for line in headerText.split(whereSeparator: \.isNewline) {
            guard let colon = line.firstIndex(of: ":"), !line.hasPrefix("HTTP/") else { continue }
            parsed[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return CurlResult(
            exitCode: result.exitCode, status: Int(result.stdout) ?? 0, headers: parsed,
            body: (try? String(contentsOfFile: bodyFile, encoding: .utf8)) ?? "", stderr: result.stderr)
    }

    struct ProcessResult {
        let exitCode: Int32
        let stdout: String
        let stderr: String
    }

    /// Runs a tool to completion without blocking a concurrency thread.
    func run(_ executable: String, _ arguments: [String]) async throws -> ProcessResult {
        let result = try await Tool.run(executable, arguments)
        return ProcessResult(exitCode: result.status, stdout: result.output, stderr: result.errors)
    }

    /// Several requests on one connection with curl's `--next`; returns each status.
    func curlSequence(_ requests: [(url: String, headers: [String])]) async throws -> (
        statuses: [Int], bodies: [String]
    ) {
        var arguments: [String] = []
        var bodyFiles: [String] = []
        let payloadFile = try writeFile("seq-\(UUID().uuidString)", Self.payload)
        for (index, request) in requests.enumerated() {
            if index > 0 { arguments.append("--next") }
            let bodyFile = directory.appendingPathComponent("seq-body-\(UUID().uuidString)").path
            bodyFiles.append(bodyFile)
            arguments += [
                "-sS", "--http2", "--cacert", caFile, "-o", bodyFile, "-w", "%{http_code}\n", "--max-time", "10",
                "--data-binary", "@" + payloadFile,
            ]
            for header in request.headers { arguments += ["-H", header] }
            arguments.append(request.url)
        }
        let result = try await run("/usr/bin/curl", arguments)
        let statuses = result.stdout.split(whereSeparator: \.isNewline).compactMap { Int($0) }
        let bodies = bodyFiles.map { (try? String(contentsOfFile: $0, encoding: .utf8)) ?? "" }
        return (statuses, bodies)
    }
}
