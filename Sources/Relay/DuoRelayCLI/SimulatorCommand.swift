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
        usage: duo-relay apns-sim --team-id ID (--keys DIR | --key-id ID --public-key FILE) [options]

          --team-id ID           the team id provider tokens must carry (the relay's APNS_TEAM_ID)
          --keys DIR             accept tokens signed with any APNs key in DIR: every file named
                                 AuthKey_<KEY ID>.p8, as Apple names them, by that key id. Two keys
                                 in DIR rehearse a rotation with both valid, as at Apple. Read at
                                 start. A throwaway key for trying things:
                                   openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
                                     -out DIR/AuthKey_TESTKEY001.p8
          --key-id ID            the key id provider tokens must name (the relay's APNS_KEY_ID_*)
          --public-key FILE      the public half of that key, as a PEM "PUBLIC KEY" (not the .p8
                                 itself). From a .p8:
                                   openssl pkey -in AuthKey_KEYID.p8 -pubout -out apns-public.pem
          --listen HOST:PORT     where to listen (default 127.0.0.1:4443; port 0 picks a free one)
          --topic TOPIC          accepted apns-topic (default app.openduo.pocket)
          --cert FILE --private-key FILE
                                 TLS identity; without them a throwaway CA and certificate are made
          --ca-dir DIR           keep the CA and server certificate in DIR (ca.pem, server.pem,
                                 server-key.pem), made on first use and read at every later start,
                                 so that relays trusting DIR/ca.pem ("apns": {"ca_file": ...}) keep
                                 trusting the simulator after it restarts (valid 30 days from when
                                 they were made; remove the files for new ones)
          --ca-out FILE          where to write a throwaway CA made at this start (default
                                 ./apns-sim-ca.pem); the relay trusts it with "apns": {"ca_file": FILE}
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
                    "--ca-out", "--record", "--fault", "--keys", "--ca-dir",
                ])
            let faults = try Usage.faults(in: arguments)
            let keyID = try Usage.option("--key-id", in: arguments)
            let keyFile = try Usage.option("--public-key", in: arguments)
            let keyDirectory = try Usage.option("--keys", in: arguments)
            guard let teamID = try Usage.option("--team-id", in: arguments),
                keyDirectory != nil || (keyID != nil && keyFile != nil)
            else {
                throw UsageError(problem: "--team-id and either --keys DIR or --key-id and --public-key are required")
            }
            guard (keyID == nil) == (keyFile == nil) else {
                throw UsageError(problem: "--key-id and --public-key go together")
            }
            let caDirectory = try Usage.option("--ca-dir", in: arguments)
            let others = try ["--cert", "--private-key", "--ca-out"].filter {
                try Usage.option($0, in: arguments) != nil
            }
            if caDirectory != nil, !others.isEmpty {
                throw UsageError(problem: "--ca-dir keeps its own CA: not with --cert, --private-key or --ca-out")
            }
            // Read as the relay reads `listen`: `host:port` or `[ipv6]:port`.
            guard let listen = ListenAddress(try Usage.option("--listen", in: arguments) ?? "127.0.0.1:4443") else {
                throw UsageError(problem: "--listen must be HOST:PORT or [IPV6]:PORT")
            }
            var keys: [String: P256.Signing.PublicKey] = [:]
            if let keyDirectory { keys = try SimulatorKeyDirectory.keys(in: keyDirectory) }
            if let keyID, let keyFile {
                let keyText = try String(contentsOfFile: keyFile, encoding: .utf8)
                guard !keyText.contains("PRIVATE KEY") else {
                    throw UsageError(
                        problem: "--public-key wants the public key PEM, not the .p8: "
                            + "openssl pkey -in KEY.p8 -pubout -out apns-public.pem (or --keys DIR, which reads .p8)")
                }
                keys[keyID] = try P256.Signing.PublicKey(pemRepresentation: keyText)
            }
            var certificate: String
            var privateKey: String
            if let certFile = try Usage.option("--cert", in: arguments),
                let keyFile = try Usage.option("--private-key", in: arguments)
            {
                certificate = try String(contentsOfFile: certFile, encoding: .utf8)
                privateKey = try String(contentsOfFile: keyFile, encoding: .utf8)
            } else if let caDirectory {
                let kept = try SimulatorCADirectory.load(caDirectory)
                Log.line(
                    "apns-sim: " + (kept.made ? "CA made and kept in " : "CA kept from an earlier start: ")
                        + kept.caPath,
                    event: "simulator_ca", fields: ["ca_file": kept.caPath])
                certificate = kept.certificatePEM
                privateKey = kept.privateKeyPEM
            } else {
                let pki = try SimulatorPKI.generate()
                let caOut = try Usage.option("--ca-out", in: arguments) ?? "apns-sim-ca.pem"
                try pki.caCertificatePEM.write(toFile: caOut, atomically: true, encoding: .utf8)
                Log.line(
                    "apns-sim: throwaway CA written to \(caOut)", event: "simulator_ca", fields: ["ca_file": caOut])
                certificate = pki.certificatePEM
                privateKey = pki.privateKeyPEM
            }
            var config = SimulatorConfiguration(
                certificatePEM: certificate, privateKeyPEM: privateKey, teamID: teamID, keys: keys,
                topics: [try Usage.option("--topic", in: arguments) ?? "app.openduo.pocket"])
            config.host = listen.host
            config.port = listen.port
            config.recordFile = try Usage.option("--record", in: arguments)
            config.tokenFaults = faults
            config.onDeliver = { note in Output.standard(DevCommand.describe(note)) }
            let simulator = try APNsSimulator(configuration: config)
            let address = "\(ListenAddress(host: listen.host, port: simulator.port))"
            Log.line(
                "apns-sim: accepting provider tokens of key ids " + keys.keys.sorted().joined(separator: ", "),
                event: "simulator_keys", fields: ["key_ids": keys.keys.sorted().joined(separator: " ")])
            Log.line("apns-sim: listening on https://\(address)", event: "listening", fields: ["address": address])
            if !faults.isEmpty {
                Log.line(
                    "apns-sim: faults by device token prefix:\n" + Usage.describe(faults), event: "simulator_faults")
            }
            TerminationSignals.wait()
            simulator.stop()
            return 0
        } catch let error as UsageError {
            return Usage.fail(error.problem)
        } catch {
            Log.line("apns-sim: cannot start: \(error)", level: .error, event: "start_refused")
            return 1
        }
    }
}
