import APNsSimulator
import Dispatch
import Foundation
import RelayCore
import RelayCrypto
import RelayServer

/// `simulator`, `jwt` and `apns-request`: the APNs side of the benchmark. One directory holds a
/// throwaway APNs key and simulator TLS identity, made on first use and shared by every run, so that
/// the relay, the simulator and h2load agree on them.
enum BenchSimulator {
    static let teamID = "BENCHTEAM1"
    static let keyID = "BENCHKEY01"
    static let topic = "app.openduo.pocket"

    struct Files {
        let directory: String
        var apnsKey: String { directory + "/apns-key.pem" }
        var caCertificate: String { directory + "/ca.pem" }
        var certificate: String { directory + "/sim-cert.pem" }
        var certificateKey: String { directory + "/sim-key.pem" }
        var port: String { directory + "/sim.port" }
    }

    /// Makes the key and TLS identity if the directory does not hold them yet.
    static func prepare(_ files: Files) throws {
        let manager = FileManager.default
        try manager.createDirectory(atPath: files.directory, withIntermediateDirectories: true)
        if !manager.fileExists(atPath: files.apnsKey) {
            try P256.Signing.PrivateKey().pemRepresentation.write(
                toFile: files.apnsKey, atomically: true, encoding: .utf8)
        }
        if !manager.fileExists(atPath: files.certificate) {
            let pki = try SimulatorPKI.generate()
            try pki.caCertificatePEM.write(toFile: files.caCertificate, atomically: true, encoding: .utf8)
            try pki.privateKeyPEM.write(toFile: files.certificateKey, atomically: true, encoding: .utf8)
            try pki.certificatePEM.write(toFile: files.certificate, atomically: true, encoding: .utf8)
        }
    }

    static func privateKey(_ files: Files) throws -> P256.Signing.PrivateKey {
        try P256.Signing.PrivateKey(pemRepresentation: String(contentsOfFile: files.apnsKey, encoding: .utf8))
    }

    /// Serves until SIGTERM or SIGINT; the bound port is written to `sim.port` once listening.
    static func serve(_ files: Files, port: UInt16) throws {
        try prepare(files)
        var config = SimulatorConfiguration(
            certificatePEM: try String(contentsOfFile: files.certificate, encoding: .utf8),
            privateKeyPEM: try String(contentsOfFile: files.certificateKey, encoding: .utf8), teamID: teamID,
            keys: [keyID: try privateKey(files).publicKey], topics: [topic])
        config.port = port
        // h2load opens its streams before it sees the simulator's SETTINGS: lift the one-stream rule
        // for new connections, for the relay and h2load alike (see APNsSimulatorTests' throughput test).
        config.initialMaxConcurrentStreams = 1000
        // Millions of pushes: keep none of them in memory (the benchmark reads only counters).
        config.retainedDeliveries = 0
        let simulator = try APNsSimulator(configuration: config)
        // SIGUSR1: the next push is answered 403 ExpiredProviderToken (the provider-token runs' forced refresh).
        let expiry = BenchTokenRefresh.expireOnSignal(simulator)
        try String(simulator.port).write(toFile: files.port, atomically: true, encoding: .utf8)
        TerminationSignals.wait()
        expiry.cancel()
        LoadCommand.write(BenchTokenRefresh.statisticsLine(simulator.statistics))
        simulator.stop()
    }

    /// A provider token signed now with the benchmark's APNs key.
    static func providerToken(_ files: Files) throws -> String {
        let credentials = ProviderCredentials(keyID: keyID, teamID: teamID, key: try privateKey(files))
        return try credentials.sign(issuedAt: UInt64(Date().timeIntervalSince1970))
    }

    /// Writes the APNs request the relay would send for a typical push (payload file, and its headers as
    /// h2load `-H` lines, provider token included) and prints its path.
    static func writeRequest(_ files: Files) throws -> String {
        let push = PushRequest(
            grant: "", sealed: Base64.encode(SecureRandom.bytes(count: PushRequest.sealedByteCount)),
            id: Hex.encode(SecureRandom.bytes(count: 32)), thread: Hex.encode(SecureRandom.bytes(count: 32)))
        let settings = NotificationSettings(topic: topic, placeholder: "PUSH", expirationSeconds: 86400)
        let notification = Notification(
            push: push, token: SecureRandom.bytes(count: 32), settings: settings,
            expiresAt: settings.expiration(now: UInt64(Date().timeIntervalSince1970)))
        try Data(notification.payload).write(to: URL(fileURLWithPath: files.directory + "/payload.json"))
        var headers = ["authorization: bearer " + (try providerToken(files))]
        headers += notification.headers.map { "\($0.name): \($0.value)" }
        try (headers.joined(separator: "\n") + "\n").write(
            toFile: files.directory + "/headers.txt", atomically: true, encoding: .utf8)
        return notification.path
    }
}
