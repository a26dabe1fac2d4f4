import APNsSimulator
import Foundation
import RelayCrypto
import RelayTestSupport

/// An APNs simulator in this process and the real relay binary pointed at it.
final class PushFixture: Sendable {
    let simulator: APNsSimulator
    let relay: RelayProcess
    let secrets: TestSecrets
    let topic = "app.openduo.pocket"
    /// How the simulator was configured (with its port), to start it again.
    let simulatorConfiguration: SimulatorConfiguration
    /// The relay's configuration text and extra environment, to start more instances like it.
    let relayConfigText: String
    let relayEnvironment: [String: String]

    /// - Parameters:
    ///   - relayConfig: extra top-level keys for the relay's configuration.
    ///   - apnsConfig: extra keys for its `apns` section.
    ///   - apnsHost: how the relay's APNs origins name the simulator (`localhost` makes the relay look the name up).
    init(
        relayConfig: String = #""ip_limit":{"requests":100000,"period_s":10,"block_s":10}"#,
        apnsConfig: String = "", apnsHost: String = "127.0.0.1", secrets: TestSecrets = TestSecrets(),
        maxConcurrentStreams: UInt32 = 1000, simulatorKeys: [String: P256.Signing.PublicKey]? = nil,
        relayEnvironment: [String: String] = [:], tokenFaults: [TokenFault] = [], goawayReason: String? = nil
    ) throws {
        self.secrets = secrets
        let pki = TestPKI.shared
        var config = SimulatorConfiguration(
            certificatePEM: pki.pem.certificatePEM, privateKeyPEM: pki.pem.privateKeyPEM, teamID: secrets.teamID,
            keys: simulatorKeys ?? [secrets.keyID: secrets.apnsKey.publicKey], topics: [topic])
        config.maxConcurrentStreams = maxConcurrentStreams
        config.tokenFaults = tokenFaults
        config.goawayReason = goawayReason
        simulator = try APNsSimulator(configuration: config)
        config.port = simulator.port
        simulatorConfiguration = config
        let caFile = pki.caFile
        let origin = "https://\(apnsHost):\(simulator.port)"
        let apns =
            #""sandbox_origin":"\#(origin)","production_origin":"\#(origin)","ca_file":"\#(caFile)""#
            + (apnsConfig.isEmpty ? "" : "," + apnsConfig)
        relayConfigText = RelayProcess.config(extra: relayConfig, apns: apns)
        self.relayEnvironment = relayEnvironment
        relay = try RelayProcess(config: relayConfigText, secrets: secrets, extraEnvironment: relayEnvironment)
    }

    /// Another instance with the same configuration and secrets, on its own port.
    func anotherRelay() throws -> RelayProcess {
        try RelayProcess(config: relayConfigText, secrets: secrets, extraEnvironment: relayEnvironment)
    }

    deinit {
        simulator.stop()
    }

    static func hex64() -> String {
        TestHex.random(uppercase: true)
    }

    /// Mints a grant through the relay.
    func grant(token: String, environment: String = "sandbox", on connection: RawHTTPClient? = nil) throws -> String {
        let connection = try connection ?? relay.connect()
        let response = try connection.request(
            "POST", "/v1/grant", body: Array(#"{"token":"\#(token)","environment":"\#(environment)"}"#.utf8))
        guard response.status == 200, let grant = response.json?["grant"] as? String else {
            throw TestFailure("grant failed: \(response.status) \(response.text)")
        }
        return grant
    }

    static let sealed = Base64.encode(SecureRandom.bytes(count: 2934))

    static func pushBody(grant: String, id: String = hex64(), thread: String = hex64(), sealed: String = sealed)
        -> [UInt8]
    {
        PushBody.bytes(grant: grant, sealed: sealed, id: id, thread: thread)
    }

    func push(grant: String, id: String = hex64(), on connection: RawHTTPClient? = nil) throws
        -> RawHTTPClient.Response
    {
        let connection = try connection ?? relay.connect()
        return try connection.request("POST", "/v1/push", body: Self.pushBody(grant: grant, id: id))
    }

    /// Waits (briefly) for the simulator to have recorded `count` notifications.
    func waitForDeliveries(_ count: Int, timeoutSeconds: Double = 10) -> [DeliveredNotification] {
        Poll.until(within: .seconds(timeoutSeconds), every: .milliseconds(10)) { simulator.delivered.count >= count }
        return simulator.delivered
    }
}

/// Runs `body` on `count` threads at once and collects what each returned. The threads are joined: when this
/// returns, none of them holds `body` or what it captured (a fixture released by a thread after its test ended
/// stopped its relay outside the test; see `JoinableThread`).
func concurrently<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) throws -> T) -> [Result<T, any Error>] {
    let results = ResultBox<T>(count: count)
    var threads: [JoinableThread] = []
    for index in 0..<count {
        do {
            threads.append(try JoinableThread(stackSize: 1 << 20) { results.set(index, Result { try body(index) }) })
        } catch {
            results.set(index, .failure(error))
        }
    }
    for thread in threads { thread.join() }
    return results.all
}

final class ResultBox<T: Sendable>: @unchecked Sendable {
    // @unchecked: every access goes through `lock`.
    private let lock = NSLock()
    private var values: [Result<T, any Error>?]

    init(count: Int) { values = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ value: Result<T, any Error>) {
        lock.lock()
        values[index] = value
        lock.unlock()
    }

    var all: [Result<T, any Error>] {
        lock.lock()
        defer { lock.unlock() }
        return values.map { $0! }
    }
}
