import APNsSimulator
import Foundation
import RelayCore
import RelayCrypto
import RelayServer

/// `duo-relay dev`: the embedded default. A relay and an APNs simulator on loopback, with a
/// throwaway APNs key, relay key and CA; prints how to try it, and the simulator prints each
/// notification it receives (the relay itself never does).
enum DevCommand {
    static let topic = "app.openduo.pocket"
    static let keyID = "DEVKEY0001"
    static let teamID = "DEVTEAM001"

    static func run(_ arguments: [String]) -> Int32 {
        let port: UInt16
        do throws(UsageError) {
            try Usage.check(arguments, allowed: ["--port"])
            let text = try Usage.option("--port", in: arguments) ?? "8787"
            guard let value = UInt16(text) else { throw UsageError(problem: "--port must be 0 to 65535") }
            port = value
        } catch {
            return Usage.fail(error.problem)
        }
        do {
            let (relay, simulator) = try start(port: port)
            let listen = "127.0.0.1:\(relay.port)"
            Output.standard(instructions(listen: listen, simulatorPort: simulator.port))
            relay.runUntilSignalled()
            simulator.stop()
            return 0
        } catch {
            Log.line("duo-relay dev: cannot start: \(error)")
            return 1
        }
    }

    static func start(port: UInt16) throws -> (Relay, APNsSimulator) {
        let pki = try SimulatorPKI.generate()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "duo-relay-dev-\(ProcessInfo.processInfo.processIdentifier)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let caFile = directory.appendingPathComponent("ca.pem").path
        try pki.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)

        let apnsKey = P256.Signing.PrivateKey()
        var simulatorConfig = SimulatorConfiguration(
            certificatePEM: pki.certificatePEM, privateKeyPEM: pki.privateKeyPEM, teamID: teamID,
            keys: [keyID: apnsKey.publicKey], topics: [topic])
        simulatorConfig.onDeliver = { note in Output.standard(describe(note)) }
        let simulator = try APNsSimulator(configuration: simulatorConfig)

        var config = RelayConfiguration(topic: topic)
        config.listen = ListenAddress(host: "127.0.0.1", port: port)
        config.apns.sandboxOrigin = "https://127.0.0.1:\(simulator.port)"
        config.apns.productionOrigin = "https://127.0.0.1:\(simulator.port)"
        config.apns.caFile = caFile
        config.grantKeyID = 1
        let secrets = RelaySecrets(
            teamID: teamID,
            apnsKeys: [
                .sandbox: .init(keyID: keyID, key: apnsKey), .production: .init(keyID: keyID, key: apnsKey),
            ],
            relayKeys: RelayKeys([1: SymmetricKey.generate()]))
        let relay = try Relay(setup: try RelaySetup(configuration: config, secrets: secrets))
        return (relay, simulator)
    }

    static func describe(_ note: DeliveredNotification) -> String {
        "apns-sim: delivered \(note.apnsID) to device \(note.deviceToken.prefix(8))… topic \(note.topic), "
            + "collapse-id \(note.collapseID ?? "-"), payload \(note.payload.utf8.count) bytes:\n  "
            + String(note.payload.prefix(160)) + (note.payload.count > 160 ? "…" : "")
    }

    static func instructions(listen: String, simulatorPort: UInt16) -> String {
        let token = String(repeating: "ab", count: 32)
        return """
            duo-relay dev: relay on http://\(listen), APNs simulator on https://127.0.0.1:\(simulatorPort)
            Throwaway keys; nothing is kept. Try it from another shell:

              GRANT=$(curl -s http://\(listen)/v1/grant \\
                -d '{"token":"\(token)","environment":"sandbox"}' | sed -E 's/.*"grant":"([^"]+)".*/\\1/')
              SEALED=$(head -c 2934 /dev/urandom | base64 -w0)
              curl -s http://\(listen)/v1/push -d "{\\"grant\\":\\"$GRANT\\",\\"sealed\\":\\"$SEALED\\",\\
            \\"id\\":\\"$(openssl rand -hex 32)\\",\\"thread\\":\\"$(openssl rand -hex 32)\\"}"

            Each notification the simulator receives is shown below. Ctrl-C stops.
            """
    }
}
