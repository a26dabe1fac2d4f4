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

    static let help = """
        usage: duo-relay dev [--tls] [--port N] [--metrics-port N] [--fault PREFIX=OUTCOME ...]

        A playground: a relay and an APNs simulator on loopback, with throwaway keys, limits relaxed
        for trying things by hand, and GET /metrics on its own port. Nothing is kept: its temporary
        folder is removed when it stops (Ctrl-C).

          --tls                  the relay serves HTTPS with a certificate from the throwaway CA (the
                                 commands printed trust that CA: curl --cacert, push --ca-file)
          --port N               the relay's port (default 8787; 0 picks a free one)
          --metrics-port N       the metrics listener's port (default 0: a free one, printed)
        """ + "\n" + Usage.faultHelp

    /// Relaxed so that trying things by hand never meets a limit by accident (docs/DESIGN.md's
    /// defaults are 20 per 60 s and 10 per 10 s); a phone's or address's limit can still be
    /// reached on purpose with a loop.
    static let pushLimit = LimitPolicy(requests: 600, periodSeconds: 60)
    static let ipLimit = LimitPolicy(requests: 600, periodSeconds: 10, blockSeconds: 10)

    static func run(_ arguments: [String]) -> Int32 {
        if arguments.contains("--help") {
            Output.standard(help)
            return 0
        }
        let port: UInt16
        let metricsPort: UInt16
        let faults: [TokenFault]
        let tls = arguments.contains("--tls")
        do throws(UsageError) {
            try Usage.check(arguments.filter { $0 != "--tls" }, allowed: ["--port", "--metrics-port", "--fault"])
            port = try portOption("--port", in: arguments, default: 8787)
            metricsPort = try portOption("--metrics-port", in: arguments, default: 0)
            faults = try Usage.faults(in: arguments)
        } catch {
            return Usage.fail(error.problem)
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "duo-relay-dev-\(ProcessInfo.processInfo.processIdentifier)")
        // Whatever happens, the throwaway CA goes with the process.
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let (relay, simulator) = try start(
                port: port, metricsPort: metricsPort, faults: faults, directory: directory, tls: tls)
            Output.standard(
                instructions(
                    listen: "127.0.0.1:\(relay.port)", simulatorPort: simulator.port,
                    metricsPort: relay.metricsPort ?? 0, directory: directory.path, faults: faults,
                    caFile: tls ? directory.appendingPathComponent("ca.pem").path : nil))
            relay.runUntilSignalled()
            simulator.stop()
            Output.standard("duo-relay dev: stopped; \(directory.path) removed, nothing kept")
            return 0
        } catch {
            Log.line("dev: cannot start: \(error)", level: .error, event: "start_refused")
            return 1
        }
    }

    private static func portOption(_ name: String, in arguments: [String], default value: UInt16) throws(UsageError)
        -> UInt16
    {
        guard let text = try Usage.option(name, in: arguments) else { return value }
        guard let port = UInt16(text) else { throw UsageError(problem: "\(name) must be 0 to 65535") }
        return port
    }

    static func start(
        port: UInt16, metricsPort: UInt16 = 0, faults: [TokenFault] = [], directory: URL, tls: Bool = false
    ) throws -> (Relay, APNsSimulator) {
        let pki = try SimulatorPKI.generate()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let caFile = directory.appendingPathComponent("ca.pem").path
        try pki.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)

        let apnsKey = P256.Signing.PrivateKey()
        var simulatorConfig = SimulatorConfiguration(
            certificatePEM: pki.certificatePEM, privateKeyPEM: pki.privateKeyPEM, teamID: teamID,
            keys: [keyID: apnsKey.publicKey], topics: [topic])
        simulatorConfig.onDeliver = { note in Output.standard(describe(note)) }
        simulatorConfig.tokenFaults = faults
        let simulator = try APNsSimulator(configuration: simulatorConfig)

        var config = RelayConfiguration(topic: topic)
        config.listen = ListenAddress(host: "127.0.0.1", port: port)
        config.metricsListen = ListenAddress(host: "127.0.0.1", port: metricsPort)
        config.pushLimit = pushLimit
        config.ipLimit = ipLimit
        config.apns.sandboxOrigin = "https://127.0.0.1:\(simulator.port)"
        config.apns.productionOrigin = "https://127.0.0.1:\(simulator.port)"
        config.apns.caFile = caFile
        config.grantKeyID = 1
        if tls {
            // The simulator's certificate (localhost, 127.0.0.1, ::1) under the same throwaway CA; its key readable by
            // this user only, as serve requires.
            let certificateFile = directory.appendingPathComponent("relay.pem").path
            let keyFile = directory.appendingPathComponent("relay.key").path
            try pki.certificatePEM.write(toFile: certificateFile, atomically: true, encoding: .utf8)
            guard FileManager.default.createFile(atPath: keyFile, contents: nil, attributes: [.posixPermissions: 0o600])
            else { throw CocoaError(.fileWriteUnknown) }
            try Data(pki.privateKeyPEM.utf8).write(to: URL(fileURLWithPath: keyFile))
            config.tls = RelayConfiguration.TLSFiles(certificateFile: certificateFile, keyFile: keyFile)
        }
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

    static func instructions(
        listen: String, simulatorPort: UInt16, metricsPort: UInt16, directory: String, faults: [TokenFault],
        caFile: String? = nil
    ) -> String {
        let token = String(repeating: "ab", count: 32)
        // With --tls, every command trusts the throwaway CA.
        let scheme = caFile == nil ? "http" : "https"
        let curl = caFile.map { "curl -s --cacert \($0)" } ?? "curl -s"
        let push = caFile.map { " --ca-file \($0)" } ?? ""
        var text = """
            duo-relay dev: relay on \(scheme)://\(listen), APNs simulator on https://127.0.0.1:\(simulatorPort)
            metrics: http://127.0.0.1:\(metricsPort)/metrics
            limits, relaxed for trying by hand: \(pushLimit.requests) pushes per phone per \(pushLimit.period / 1_000_000_000) s, \
            \(ipLimit.requests) requests per address per \(ipLimit.period / 1_000_000_000) s (then blocked \(ipLimit.block / 1_000_000_000) s)
            Throwaway keys and CA in \(directory); nothing is kept: it is removed on exit.
            Try it from another shell:

              GRANT=$(\(curl) \(scheme)://\(listen)/v1/grant \\
                -d '{"token":"\(token)","environment":"sandbox"}' | sed -E 's/.*"grant":"([^"]+)".*/\\1/')
              SEALED=$(head -c 2934 /dev/urandom | base64 -w0)
              \(curl) \(scheme)://\(listen)/v1/push -d "{\\"grant\\":\\"$GRANT\\",\\"sealed\\":\\"$SEALED\\",\\
            \\"id\\":\\"$(openssl rand -hex 32)\\",\\"thread\\":\\"$(openssl rand -hex 32)\\"}"

            or: \(Invocation.command) push --relay \(scheme)://\(listen)\(push) --grant "$GRANT"

            """
        if faults.isEmpty {
            text += "No faults set (--fault PREFIX=OUTCOME makes the simulator misbehave for some tokens).\n"
        } else {
            text += "Faults: grants for a device token starting with a prefix get its outcome from the simulator:\n"
            text += Usage.describe(faults) + "\n"
        }
        return text + "Each notification the simulator receives is shown below. Ctrl-C stops."
    }
}
