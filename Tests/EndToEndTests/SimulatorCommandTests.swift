import Foundation
import RelayCrypto
import RelayTestSupport
import Testing

/// `duo-relay apns-sim`, the simulator alone, with a relay pointed at it: both real binaries.
@Suite struct SimulatorCommandTests {
    /// Starts `duo-relay apns-sim` for `secrets` in `directory` and returns it with its port.
    static func startSimulator(
        secrets: TestSecrets, directory: URL, caFile: String, extra: [String]
    ) throws -> (RelayProcess, UInt16) {
        let publicKey = directory.appendingPathComponent("apns-public.pem").path
        try secrets.apnsKey.publicKey.pemRepresentation.write(toFile: publicKey, atomically: true, encoding: .utf8)
        let simulator = try RelayProcess(
            arguments: [
                "apns-sim", "--listen", "127.0.0.1:0", "--team-id", secrets.teamID, "--key-id", secrets.keyID,
                "--public-key", publicKey, "--ca-out", caFile,
            ] + extra,
            environment: [:], directory: directory)
        return (simulator, try #require(simulator.printedPort(after: "listening on https://127.0.0.1:")))
    }

    @Test func aRelayDeliversThroughTheStandaloneSimulator() throws {
        let secrets = TestSecrets()
        let directory = try RelayProcess.temporaryDirectory()
        let caFile = directory.appendingPathComponent("ca.pem").path
        let record = directory.appendingPathComponent("delivered.jsonl").path
        let (simulator, simulatorPort) = try Self.startSimulator(
            secrets: secrets, directory: directory, caFile: caFile, extra: ["--record", record])
        #expect(FileManager.default.fileExists(atPath: caFile))

        let relay = try RelayProcess(
            config: RelayProcess.config(
                apns: #""sandbox_origin":"https://127.0.0.1:\#(simulatorPort)","ca_file":"\#(caFile)""#),
            secrets: secrets)
        let connection = try relay.connect()
        let token = randomToken()
        let grant = try #require(
            try connection.request(
                "POST", "/v1/grant", body: Array(#"{"token":"\#(token)","environment":"sandbox"}"#.utf8)
            ).json?["grant"] as? String)
        let push = try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: grant))
        #expect(push.status == 200)
        let apnsID = try #require(push.json?["apns_id"] as? String)
        Poll.until(within: .seconds(30)) { simulator.standardOutput.contains(apnsID) }
        #expect(simulator.standardOutput.contains("apns-sim: delivered \(apnsID)"))
        let recorded = try String(contentsOfFile: record, encoding: .utf8)
        #expect(recorded.contains(apnsID))
        #expect(recorded.contains(token))
        simulator.signal(SIGTERM)
        #expect(try simulator.waitForExit() == 0)
    }

    @Test func missingOptionsAreAUsageError() throws {
        let simulator = try RelayProcess(arguments: ["apns-sim", "--listen", "127.0.0.1:0"], environment: [:])
        #expect(try simulator.waitForExit() == 64)
        #expect(simulator.standardError.contains("--team-id"))
    }

    @Test func faultsFromTheCommandLineReachTheRelaysCaller() throws {
        let secrets = TestSecrets()
        let directory = try RelayProcess.temporaryDirectory()
        let caFile = directory.appendingPathComponent("ca.pem").path
        let (simulator, simulatorPort) = try Self.startSimulator(
            secrets: secrets, directory: directory, caFile: caFile,
            extra: ["--fault", "410=unregistered", "--fault", "503=unavailable"])
        let relay = try RelayProcess(
            config: RelayProcess.config(
                apns: #""sandbox_origin":"https://127.0.0.1:\#(simulatorPort)","ca_file":"\#(caFile)""#),
            secrets: secrets)
        let connection = try relay.connect()
        func push(token: String) throws -> RawHTTPClient.Response {
            let grant = try #require(
                try connection.request(
                    "POST", "/v1/grant", body: Array(#"{"token":"\#(token)","environment":"sandbox"}"#.utf8)
                ).json?["grant"] as? String)
            return try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: grant))
        }
        #expect(try push(token: "ff" + String(repeating: "0", count: 62)).status == 200)
        #expect(try push(token: "410" + String(repeating: "0", count: 61)).error == "unregistered")
        #expect(try push(token: "503" + String(repeating: "0", count: 61)).status == 502)
        #expect(simulator.standardError.contains("tokens starting with 410: unregistered"))
        #expect(simulator.standardError.contains("tokens starting with 503: unavailable"))
        simulator.signal(SIGTERM)
        #expect(try simulator.waitForExit() == 0)
    }

    @Test func aPrivateKeyGivenAsThePublicKeySaysHowToMakeOne() throws {
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let p8 = directory.appendingPathComponent("AuthKey.p8").path
        try TestSecrets().apnsKey.pemRepresentation.write(toFile: p8, atomically: true, encoding: .utf8)
        let run = try CommandRun([
            "apns-sim", "--listen", "127.0.0.1:0", "--team-id", "TEAM000001", "--key-id", "KEY0000001",
            "--public-key", p8,
        ])
        #expect(run.status == 64)
        #expect(run.standardError.contains("openssl pkey -in KEY.p8 -pubout"))
    }

    /// A rotation rehearsed as at Apple: the simulator accepts both keys of its `--keys` directory, so relays on
    /// the old key and on the new one both deliver; and, restarted on the same `--ca-dir`, it serves the kept CA's
    /// certificate, which relays still trust without a reload.
    @Test func bothKeysOfADirectoryAreAcceptedAndTheKeptCASurvivesARestart() throws {
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let keys = directory.appendingPathComponent("keys").path
        let caDirectory = directory.appendingPathComponent("ca").path
        try FileManager.default.createDirectory(atPath: keys, withIntermediateDirectories: true)
        var old = TestSecrets()
        old.keyID = "OLDKEY0001"
        var new = TestSecrets()
        new.keyID = "NEWKEY0002"
        new.teamID = old.teamID
        for secrets in [old, new] {
            try secrets.apnsKey.pemRepresentation.write(
                toFile: keys + "/AuthKey_\(secrets.keyID).p8", atomically: true, encoding: .utf8)
        }
        func startSimulator(port: UInt16) throws -> (RelayProcess, UInt16) {
            let simulator = try RelayProcess(
                arguments: [
                    "apns-sim", "--listen", "127.0.0.1:\(port)", "--team-id", old.teamID, "--keys", keys, "--ca-dir",
                    caDirectory,
                ],
                environment: [:], directory: directory.appendingPathComponent("run-\(port)"))
            return (simulator, try #require(simulator.printedPort(after: "listening on https://127.0.0.1:")))
        }
        let (first, port) = try startSimulator(port: 0)
        #expect(
            first.logMessages.contains("apns-sim: CA made and kept in \(caDirectory)/ca.pem"), "\(first.standardError)")
        #expect(first.logMessages.contains("apns-sim: accepting provider tokens of key ids NEWKEY0002, OLDKEY0001"))
        let apns = #""sandbox_origin":"https://127.0.0.1:\#(port)","ca_file":"\#(caDirectory)/ca.pem""#
        let relays = try [old, new].map { try RelayProcess(config: RelayProcess.config(apns: apns), secrets: $0) }
        func push(_ relay: RelayProcess) throws -> Int {
            let connection = try relay.connect()
            let grant = try #require(
                try connection.request(
                    "POST", "/v1/grant", body: Array(#"{"token":"\#(randomToken())","environment":"sandbox"}"#.utf8)
                ).json?["grant"] as? String)
            return try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: grant)).status
        }
        #expect(try relays.map(push) == [200, 200], "both keys valid at once")
        first.signal(SIGTERM)
        #expect(try first.waitForExit() == 0)

        let (second, _) = try startSimulator(port: port)
        #expect(second.logMessages.contains("apns-sim: CA kept from an earlier start: \(caDirectory)/ca.pem"))
        // The relays reconnect by themselves and trust the restarted simulator: the same CA.
        for relay in relays {
            #expect(Poll.until(within: .seconds(15), every: .milliseconds(250)) { (try? push(relay)) == 200 })
        }
        #expect(!relays.contains { $0.standardError.contains("APNs' TLS certificate is not trusted") })
        second.signal(SIGTERM)
        #expect(try second.waitForExit() == 0)
    }

    @Test func aKeysDirectoryWithAKeyNamedOtherwiseIsRefused() throws {
        let directory = try RelayProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try TestSecrets().apnsKey.pemRepresentation.write(
            toFile: directory.appendingPathComponent("apns.p8").path, atomically: true, encoding: .utf8)
        let run = try CommandRun([
            "apns-sim", "--listen", "127.0.0.1:0", "--team-id", "TEAM000001", "--keys", directory.path,
        ])
        #expect(run.status == 1)
        #expect(run.logMessages.contains { $0.contains("apns.p8 is not named AuthKey_<KEY ID>.p8") }, "\(run.output)")
        let both = try CommandRun([
            "apns-sim", "--team-id", "TEAM000001", "--keys", directory.path, "--ca-dir", directory.path, "--ca-out",
            "x",
        ])
        #expect(both.status == 64)
        #expect(both.standardError.contains("--ca-dir keeps its own CA"))
    }
}
