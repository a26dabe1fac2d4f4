import APNsSimulator
import Dispatch
import Foundation
import RelayCore
import RelayCrypto
import RelayServer

/// `duo-relay apns-sim`: the APNs simulator alone, for trying a relay against it.
enum SimulatorCommand {
    static var help: String {
        """
        usage: duo-relay apns-sim --team-id ID --key-id ID --public-key FILE [options]

          --team-id ID           the team id provider tokens must carry (the relay's APNS_TEAM_ID)
          --key-id ID            the key id provider tokens must name (the relay's APNS_KEY_ID_*)
          --public-key FILE      the public half of the APNs key the relay signs with, as a PEM
                                 "PUBLIC KEY" (not the .p8 itself). From a .p8:
                                   openssl pkey -in AuthKey_KEYID.p8 -pubout -out apns-public.pem
                                 A throwaway key pair for trying things:
                                   openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out test.p8
          --listen HOST:PORT     where to listen (default 127.0.0.1:4443; port 0 picks a free one)
          --topic TOPIC          accepted apns-topic (default app.openduo.pocket)
          --cert FILE --private-key FILE
                                 TLS identity; without them a throwaway CA and certificate are made
          --ca-out FILE          where to write the throwaway CA (default ./apns-sim-ca.pem); the
                                 relay trusts it with "apns": {"ca_file": FILE}
          --record FILE          append each delivered notification as a JSON line
        """ + "\n" + Usage.faultHelp
    }

    static func run(_ arguments: [String]) -> Int32 {
        if arguments.contains("--help") {
            Output.standard(help)
            return 0
        }
        do {
            try Usage.check(
                arguments,
                allowed: [
                    "--listen", "--topic", "--team-id", "--key-id", "--public-key", "--cert", "--private-key",
                    "--ca-out", "--record", "--fault",
                ])
            let faults = try Usage.faults(in: arguments)
            guard let teamID = try Usage.option("--team-id", in: arguments),
                let keyID = try Usage.option("--key-id", in: arguments),
                let keyFile = try Usage.option("--public-key", in: arguments)
            else { throw UsageError(problem: "--team-id, --key-id and --public-key are required") }
            // Read as the relay reads `listen`: `host:port` or `[ipv6]:port`.
            guard let listen = ListenAddress(try Usage.option("--listen", in: arguments) ?? "127.0.0.1:4443") else {
                throw UsageError(problem: "--listen must be HOST:PORT or [IPV6]:PORT")
            }
            let keyText = try String(contentsOfFile: keyFile, encoding: .utf8)
            guard !keyText.contains("PRIVATE KEY") else {
                throw UsageError(
                    problem: "--public-key wants the public key PEM, not the .p8: "
                        + "openssl pkey -in KEY.p8 -pubout -out apns-public.pem")
            }
            let publicKey = try P256.Signing.PublicKey(pemRepresentation: keyText)
            var certificate: String
            var privateKey: String
            if let certFile = try Usage.option("--cert", in: arguments),
                let keyFile = try Usage.option("--private-key", in: arguments)
            {
                certificate = try String(contentsOfFile: certFile, encoding: .utf8)
                privateKey = try String(contentsOfFile: keyFile, encoding: .utf8)
            } else {
                let pki = try SimulatorPKI.generate()
                let caOut = try Usage.option("--ca-out", in: arguments) ?? "apns-sim-ca.pem"
                try pki.caCertificatePEM.write(toFile: caOut, atomically: true, encoding: .utf8)
                Log.line("apns-sim: throwaway CA written to \(caOut)")
                certificate = pki.certificatePEM
                privateKey = pki.privateKeyPEM
            }
            var config = SimulatorConfiguration(
                certificatePEM: certificate, privateKeyPEM: privateKey, teamID: teamID, keys: [keyID: publicKey],
                topics: [try Usage.option("--topic", in: arguments) ?? "app.openduo.pocket"])
            config.host = listen.host
            config.port = listen.port
            config.recordFile = try Usage.option("--record", in: arguments)
            config.tokenFaults = faults
            config.onDeliver = { note in Output.standard(DevCommand.describe(note)) }
            let simulator = try APNsSimulator(configuration: config)
            Log.line("apns-sim: listening on https://\(ListenAddress(host: listen.host, port: simulator.port))")
            if !faults.isEmpty { Log.line("apns-sim: faults by device token prefix:\n" + Usage.describe(faults)) }
            TerminationSignals.wait()
            simulator.stop()
            return 0
        } catch let error as UsageError {
            return Usage.fail(error.problem)
        } catch {
            Log.line("apns-sim: cannot start: \(error)")
            return 1
        }
    }
}
