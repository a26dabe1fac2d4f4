import Foundation
import RelayTestSupport
import Testing

/// `duo-relay dev`, the README's run command: what it prints works.
@Suite struct DevCommandTests {
    @Test func printedStepsDeliverANotificationTheSimulatorShows() throws {
        let dev = try RelayProcess(arguments: ["dev", "--port", "0"], environment: [:])
        let relayPort = try #require(dev.printedPort(after: "relay on http://127.0.0.1:"))
        let output = dev.standardOutput
        #expect(output.contains("curl -s http://127.0.0.1:\(relayPort)/v1/grant"))
        #expect(output.contains("/v1/push"))

        // Follow the printed steps (with this test's own HTTP client instead of curl).
        let connection = try RawHTTPClient(port: relayPort)
        let token = String(repeating: "ab", count: 32)
        let grantResponse = try connection.request(
            "POST", "/v1/grant", body: Array(#"{"token":"\#(token)","environment":"sandbox"}"#.utf8))
        let grant = try #require(grantResponse.json?["grant"] as? String)
        let push = try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: grant))
        #expect(push.status == 200)
        let apnsID = try #require(push.json?["apns_id"] as? String)
        Poll.until(within: .seconds(30)) { dev.standardOutput.contains("delivered \(apnsID)") }
        #expect(dev.standardOutput.contains("apns-sim: delivered \(apnsID) to device abababab"))
        dev.signal(SIGINT)
        #expect(try dev.waitForExit() == 0)
        // The relay itself printed nothing about the request.
        #expect(!dev.standardError.contains(token))
        #expect(!dev.standardError.contains(grant))
    }

    /// The printed steps run as printed, in a shell where `duo-relay` is not on PATH (as after scripts/dev): the
    /// curl lines deliver, and so does the `duo-relay push` line, which names the running binary.
    @Test func printedCommandsRunAsPrinted() throws {
        let dev = try RelayProcess(arguments: ["dev", "--port", "0"], environment: [:])
        Poll.until(within: .seconds(30)) { dev.standardOutput.contains("Ctrl-C stops") }
        let output = dev.standardOutput
        let start = try #require(output.range(of: "Try it from another shell:\n\n"))
        let end = try #require(output.range(of: "\nor: ", range: start.upperBound..<output.endIndex))
        let curl = String(output[start.upperBound..<end.lowerBound])
        let push = try #require(output[end.upperBound...].split(separator: "\n").first)
        #expect(!push.hasPrefix("duo-relay "), "\(push)")
        let script = curl + "\necho\n" + push + "\n"
        let run = try CommandRun.run(["/bin/bash", "-euc", script], shell: [:])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.standardOutput.contains(#""apns_id":""#), "\(run.output)")
        #expect(run.standardOutput.contains("push: delivered, apns-id "), "\(run.output)")
        Poll.until(within: .seconds(10)) {
            dev.standardOutput.components(separatedBy: "apns-sim: delivered").count == 3
        }
        #expect(dev.standardOutput.components(separatedBy: "apns-sim: delivered").count == 3)
    }

    /// The number after `marker` in `text`, if it is there.
    @Test func aPlaygroundWithRelaxedLimitsMetricsAndFaultsThatLeavesNothing() throws {
        let dev = try RelayProcess(
            arguments: [
                "dev", "--port", "0", "--fault", "410=unregistered", "--fault", "429=too-many-requests",
                "--fault", "5100=stall",
            ],
            environment: [:])
        Poll.until(within: .seconds(30)) { dev.standardOutput.contains("Ctrl-C stops") }
        let output = dev.standardOutput
        let relayPort = try #require(RelayProcess.port(after: "relay on http://127.0.0.1:", in: output))
        let metricsPort = try #require(RelayProcess.port(after: "metrics: http://127.0.0.1:", in: output))
        #expect(output.contains("limits, relaxed for trying by hand: 600 pushes per phone per 60 s"))
        #expect(output.contains("tokens starting with 410: unregistered"))
        #expect(output.contains("tokens starting with 429: too-many-requests"))
        #expect(output.contains("tokens starting with 5100: stall"))
        let folder = try #require(
            output.split(separator: "\n").first { $0.hasPrefix("Throwaway keys and CA in ") }.map {
                String($0.dropFirst("Throwaway keys and CA in ".count).prefix { $0 != ";" })
            })
        #expect(FileManager.default.fileExists(atPath: folder))

        // More requests from one address than the production default (10 per 10 s) allows.
        let connection = try RawHTTPClient(port: relayPort)
        func grant(_ token: String) throws -> String {
            let response = try connection.request(
                "POST", "/v1/grant", body: Array(#"{"token":"\#(token)","environment":"sandbox"}"#.utf8))
            return try #require(response.json?["grant"] as? String, "\(response.status) \(response.text)")
        }
        let fine = try grant(randomToken())
        for _ in 0..<12 {
            #expect(try connection.request("POST", "/v1/push", body: PushFixture.pushBody(grant: fine)).status == 200)
        }
        let gone = try connection.request(
            "POST", "/v1/push", body: PushFixture.pushBody(grant: try grant("410" + String(repeating: "0", count: 61))))
        #expect(gone.status == 410)
        #expect(gone.error == "unregistered")
        let busy = try connection.request(
            "POST", "/v1/push", body: PushFixture.pushBody(grant: try grant("429" + String(repeating: "0", count: 61))))
        #expect(busy.status == 429)
        #expect(busy.json?["limit"] as? String == "apns")

        let metrics = try RawHTTPClient(port: metricsPort).request("GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.text.contains("duo_relay_"))

        dev.signal(SIGINT)
        #expect(try dev.waitForExit() == 0)
        #expect(!FileManager.default.fileExists(atPath: folder))
        #expect(dev.standardOutput.contains("removed, nothing kept"))
    }

    @Test(arguments: [["dev", "--help"], ["apns-sim", "--help"]])
    func helpGoesToStandardOutput(_ arguments: [String]) throws {
        let process = try CommandRun(arguments)
        #expect(process.status == 0)
        #expect(process.standardOutput.hasPrefix("usage: duo-relay \(arguments[0])"))
        #expect(process.standardOutput.contains("--fault PREFIX=OUTCOME"))
        #expect(process.standardError.isEmpty)
    }

    @Test(arguments: ["41x=unregistered", "410=gone", "410"])
    func aMalformedFaultIsAUsageError(_ rule: String) throws {
        let dev = try RelayProcess(arguments: ["dev", "--port", "0", "--fault", rule], environment: [:])
        #expect(try dev.waitForExit() == 64)
        #expect(dev.standardError.contains("--fault: a fault"))
    }
}

extension DevCommandTests {
    /// `dev --tls`: the relay serves HTTPS under the throwaway CA, and the printed commands (curl --cacert, push
    /// --ca-file) run as printed.
    @Test func withTLSThePrintedCommandsTrustTheThrowawayCAAndDeliver() throws {
        let dev = try RelayProcess(arguments: ["dev", "--tls", "--port", "0"], environment: [:])
        Poll.until(within: .seconds(30)) { dev.standardOutput.contains("Ctrl-C stops") }
        let output = dev.standardOutput
        #expect(output.contains("relay on https://127.0.0.1:"), "\(output)")
        let start = try #require(output.range(of: "Try it from another shell:\n\n"))
        let end = try #require(output.range(of: "\nor: ", range: start.upperBound..<output.endIndex))
        let curl = String(output[start.upperBound..<end.lowerBound])
        #expect(curl.contains("curl -s --cacert /") && curl.contains("https://127.0.0.1:"), "\(curl)")
        let push = try #require(output[end.upperBound...].split(separator: "\n").first)
        #expect(push.contains(" push --relay https://127.0.0.1:") && push.contains(" --ca-file /"), "\(push)")
        let run = try CommandRun.run(["/bin/bash", "-euc", curl + "\necho\n" + push + "\n"], shell: [:])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.standardOutput.contains(#""apns_id":""#), "\(run.output)")
        #expect(run.standardOutput.contains("push: delivered, apns-id "), "\(run.output)")
        // Without the CA, push says the certificate is not trusted and that the push never reached the relay.
        let untrusted = try CommandRun.run(
            [
                "/bin/bash", "-euc",
                curl + "\n"
                    + push.replacingOccurrences(of: " --ca-file ", with: " --x ")
                    .replacingOccurrences(of: #"--x \S+"#, with: "", options: .regularExpression) + "\n",
            ], shell: [:])
        #expect(untrusted.status != 0)
        #expect(
            untrusted.output.contains("is not trusted") && untrusted.output.contains("never reached the relay"),
            "\(untrusted.output)")
        dev.signal(SIGINT)
        #expect(try dev.waitForExit() == 0)
    }
}
