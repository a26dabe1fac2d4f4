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
}
