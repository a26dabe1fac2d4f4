import APNsSimulator
import Foundation
import RelayCore
import RelayCrypto
import RelayTestSupport
import Testing

/// What an operator relies on: commands, metrics, readiness, secrets from files, rotation on
/// SIGHUP, and a relay that never prints what it must not.
@Suite(.serialized) struct OperationsTests {
    static let limits = ResilienceTests.generousLimits

    func run(_ arguments: [String], environment: [String: String]) throws -> (status: Int32, output: String) {
        let process = try RelayProcess(arguments: arguments, environment: environment)
        let status = try process.waitForExit()
        return (status, process.allOutput)
    }

    @Test func keygenPrintsAKeyReadyForRelayKeys() throws {
        let (status, output) = try run(["keygen", "--id", "7"], environment: [:])
        #expect(status == 0)
        let keys = try RelaySecrets.parseRelayKeys(output.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(keys.ids == [7])
        #expect(try run(["keygen", "--id", "256"], environment: [:]).status == 64)
        let other = try run(["keygen"], environment: [:]).output
        #expect(other.hasPrefix(#"{"1":""#) && other != output)
    }

    @Test func checkCatchesEveryProblemWithoutPrintingSecrets() throws {
        let directory = try RelayProcess.temporaryDirectory()
        let config = directory.appendingPathComponent("relay.json").path
        try RelayProcess.config().write(toFile: config, atomically: true, encoding: .utf8)
        let secrets = TestSecrets()
        let good = try run(["check", "--config", config], environment: secrets.environment)
        #expect(good.status == 0)
        #expect(good.output.contains("check: ok"))
        for secret in secrets.secretStrings { #expect(!good.output.contains(secret)) }

        let rsa = try String(
            contentsOfFile: Self.opensslKey(directory: directory, algorithm: ["-algorithm", "RSA"]), encoding: .utf8)
        let p384 = try String(
            contentsOfFile: Self.opensslKey(
                directory: directory, algorithm: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"]),
            encoding: .utf8)
        var cases: [(String, [String: String?], String)] = [
            ("unparsable key", ["APNS_KEY_SANDBOX": "garbage"], "APNS_KEY_SANDBOX"),
            ("RSA key", ["APNS_KEY_SANDBOX": rsa], "APNS_KEY_SANDBOX"),
            ("P-384 key", ["APNS_KEY_SANDBOX": p384], "APNS_KEY_SANDBOX"),
            ("bad key id", ["APNS_KEY_ID_SANDBOX": "abc"], "APNS_KEY_ID_SANDBOX"),
            ("bad team id", ["APNS_TEAM_ID": "lowercase1"], "APNS_TEAM_ID"),
            ("RELAY_KEYS not JSON", ["RELAY_KEYS": "nope"], "RELAY_KEYS"),
            ("short relay key", ["RELAY_KEYS": #"{"1":"AAAA"}"#], "RELAY_KEYS"),
            (
                "id out of range", ["RELAY_KEYS": #"{"300":"\#(Base64.urlEncode(SecureRandom.bytes(count: 32)))"}"#],
                "RELAY_KEYS"
            ),
            (
                "grant key missing", ["RELAY_KEYS": #"{"2":"\#(Base64.urlEncode(SecureRandom.bytes(count: 32)))"}"#],
                "grant_key_id"
            ),
            ("no environment", ["APNS_KEY_SANDBOX": nil, "APNS_KEY_ID_SANDBOX": nil], "APNS_KEY_SANDBOX"),
        ]
        cases.append(("key without id", ["APNS_KEY_ID_SANDBOX": nil], "APNS_KEY_ID_SANDBOX"))
        for (name, changes, subject) in cases {
            var environment = secrets.environment
            for (key, value) in changes { environment[key] = value }
            let result = try run(["check", "--config", config], environment: environment)
            #expect(result.status == 1, "\(name)")
            let lines = result.output.split(separator: "\n")
            #expect(lines.count == 1, "\(name): \(result.output)")
            #expect(result.output.contains(subject), "\(name): \(result.output)")
            for value in changes.values.compactMap({ $0 }) where value.count > 8 {
                #expect(!result.output.contains(value), "\(name)")
            }
        }
        // A placeholder that would push the largest notification past 4096 bytes.
        let long = directory.appendingPathComponent("long.json").path
        try RelayProcess.config(apns: #""placeholder":"\#(String(repeating: "P", count: 120))""#)
            .write(toFile: long, atomically: true, encoding: .utf8)
        let tooBig = try run(["check", "--config", long], environment: secrets.environment)
        #expect(tooBig.status == 1)
        #expect(tooBig.output.contains("apns.placeholder"))
        #expect(try run(["serve", "--config", long], environment: secrets.environment).status == 1)
        // Unknown keys and a missing --config.
        let typo = directory.appendingPathComponent("typo.json").path
        try #"{"apns":{"topic":"t"},"grant_lifetme_s":5}"#.write(toFile: typo, atomically: true, encoding: .utf8)
        #expect(
            try run(["check", "--config", typo], environment: secrets.environment).output.contains("grant_lifetme_s"))
        #expect(try run(["check"], environment: secrets.environment).status == 64)
    }

    static func opensslKey(directory: URL, algorithm: [String]) throws -> String {
        let path = directory.appendingPathComponent("key-\(UUID().uuidString).pem").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["genpkey"] + algorithm + ["-out", path]
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return path
    }

    @Test func secretsFromFilesAndCredentials() throws {
        let secrets = TestSecrets()
        let directory = try RelayProcess.temporaryDirectory()
        var environment = secrets.environment
        let keyFile = directory.appendingPathComponent("apns.p8").path
        try secrets.apnsKey.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
        environment["APNS_KEY_SANDBOX"] = nil
        environment["APNS_KEY_SANDBOX_FILE"] = keyFile
        let credentials = directory.appendingPathComponent("credentials")
        try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
        try (secrets.relayKeysJSON + "\n").write(
            to: credentials.appendingPathComponent("RELAY_KEYS"), atomically: true, encoding: .utf8)
        environment["RELAY_KEYS"] = nil
        environment["CREDENTIALS_DIRECTORY"] = credentials.path
        let config = directory.appendingPathComponent("relay.json").path
        try RelayProcess.config().write(toFile: config, atomically: true, encoding: .utf8)
        #expect(try run(["check", "--config", config], environment: environment).status == 0)
        // Both forms of one secret: refused, naming it.
        environment["APNS_KEY_SANDBOX"] = secrets.apnsKey.pemRepresentation
        let both = try run(["check", "--config", config], environment: environment)
        #expect(both.status == 1)
        #expect(both.output.contains("APNS_KEY_SANDBOX"))
        #expect(!both.output.contains("BEGIN"))
    }

    @Test func metricsCountWhatHappensAndNameNothingPrivate() throws {
        let fixture = try PushFixture(relayConfig: Self.limits + #","metrics_listen":"127.0.0.1:0""#)
        let metricsPort = try #require(
            fixture.relay.standardError.split(separator: "\n").first { $0.contains("metrics on") }
                .flatMap { $0.split(separator: ":").last }.flatMap { UInt16($0.prefix { $0.isNumber }) })
        func scrape() throws -> String {
            let response = try RawHTTPClient(port: metricsPort).request("GET", "/metrics")
            #expect(response.status == 200)
            #expect(response.headers["content-type"]?.hasPrefix("text/plain") == true)
            return response.text
        }
        func value(_ text: String, _ series: String) -> Int {
            text.split(separator: "\n").first { $0.hasPrefix(series + " ") }
                .flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
        }
        let before = try scrape()
        let token = randomToken()
        let grant = try fixture.grant(token: token)
        #expect(try fixture.push(grant: grant).status == 200)
        #expect(try fixture.push(grant: "garbage").status == 401)
        fixture.simulator.inject(.status(410, reason: "Unregistered"))
        #expect(try fixture.push(grant: grant).status == 410)
        let after = try scrape()
        #expect(
            value(after, #"duo_relay_requests_total{endpoint="grant",outcome="ok"}"#)
                == value(before, #"duo_relay_requests_total{endpoint="grant",outcome="ok"}"#) + 1)
        #expect(value(after, #"duo_relay_requests_total{endpoint="push",outcome="ok"}"#) == 1)
        #expect(value(after, #"duo_relay_requests_total{endpoint="push",outcome="grant_invalid"}"#) == 1)
        #expect(value(after, #"duo_relay_requests_total{endpoint="push",outcome="unregistered"}"#) == 1)
        #expect(value(after, #"duo_relay_apns_responses_total{environment="sandbox",status="200",reason=""}"#) == 1)
        #expect(
            value(after, #"duo_relay_apns_responses_total{environment="sandbox",status="410",reason="Unregistered"}"#)
                == 1)
        #expect(value(after, #"duo_relay_grants_opened_total{key_id="1"}"#) == 2)
        #expect(value(after, #"duo_relay_apns_latency_seconds_count{environment="sandbox"}"#) == 2)
        #expect(value(after, #"duo_relay_provider_tokens_signed_total{environment="sandbox"}"#) == 1)
        #expect(value(after, #"duo_relay_apns_connection_attempts_total{environment="sandbox"}"#) >= 1)
        #expect(after.contains("duo_relay_pushes_in_flight 0"))
        for secret in [token, grant] { #expect(!after.contains(secret)) }
        // Not on the public port.
        #expect(try fixture.relay.connect().request("GET", "/metrics").status == 404)
        // Readiness: the environment has delivered.
        let ready = try fixture.relay.connect().request("GET", "/readyz")
        #expect(ready.status == 200)
        #expect((ready.json?["environments"] as? [String: String])?["sandbox"] == "ready")
    }

    /// The relay binary allocates with jemalloc (BENCHMARKS.md, "The allocator"): it says so at start, the
    /// library is mapped in the running process, and pushes go through. Sanitizer builds use their own allocator.
    @Test func theRelayRunsOnJemalloc() throws {
        let fixture = try PushFixture()
        let systemMalloc = ProcessInfo.processInfo.environment["DUO_RELAY_SYSTEM_MALLOC"] != nil
        let announced = fixture.relay.logMessages.first { $0.contains("memory allocator:") }
        // The maps of the same binary running `dev`: `serve` is undumpable (SecretMemory), so a test that does
        // not run as root cannot read its maps. Read to the end: /proc files report a size of 0, and a sized read
        // stops early.
        let dev = try RelayProcess(arguments: ["dev", "--port", "0"], environment: [:])
        #expect(dev.printedPort(after: "relay on http://127.0.0.1:") != nil, "\(dev.allOutput)")
        let mapsFile = try #require(FileHandle(forReadingAtPath: "/proc/\(dev.process.processIdentifier)/maps"))
        let maps = String(decoding: try mapsFile.readToEnd() ?? Data(), as: UTF8.self)
        if systemMalloc {
            #expect(announced == "memory allocator: the C library's malloc")
            #expect(!maps.contains("libjemalloc"))
        } else {
            #expect(announced?.hasPrefix("memory allocator: jemalloc 5.") == true, "\(announced ?? "")")
            #expect(maps.contains("libjemalloc.so"))
        }
        let grant = try fixture.grant(token: randomToken())
        for _ in 0..<5 { #expect(try fixture.push(grant: grant).status == 200) }
    }

    /// Readiness is the instance's (docs/DESIGN.md, "Readiness"): APNs failing stays in the body, never in the status, and its
    /// state recovers without traffic.
    @Test func readinessStaysWhileAPNsFailsAndItsStateRecoversWithoutTraffic() throws {
        let fixture = try PushFixture(apnsConfig: #""timeout_ms":1000"#)
        let connection = try fixture.relay.connect()
        #expect(try connection.request("GET", "/readyz").status == 200)
        let grant = try fixture.grant(token: randomToken(), on: connection)
        #expect(try fixture.push(grant: grant, on: connection).status == 200)
        // APNs goes away: pushes answer 502, the body says the environment is failing, the instance stays ready.
        fixture.simulator.stop()
        #expect(try fixture.push(grant: grant, on: connection).status == 502)
        let down = try connection.request("GET", "/readyz")
        #expect(down.status == 200)
        #expect(down.json?["status"] as? String == "ready")
        #expect((down.json?["environments"] as? [String: String])?["sandbox"] == "failing")
        // Grants are still minted.
        #expect(try fixture.grant(token: randomToken(), on: connection).count > 20)
        // APNs comes back; with no push at all, the relay notices by itself.
        let revived = try APNsSimulator(configuration: fixture.simulatorConfiguration)
        defer { revived.stop() }
        try Poll.wait(for: "the environment ready", within: .seconds(15)) {
            let body = try? connection.request("GET", "/readyz").json
            return (body?["environments"] as? [String: String])?["sandbox"] == "ready"
        }
        #expect(revived.delivered.isEmpty)
        #expect(try fixture.push(grant: grant, on: connection).status == 200)
    }

    /// `duo_relay_ready` says what `/readyz` would, and `duo_relay_apns_environment_state` each environment's state,
    /// read at each scrape: the alerts on them (DuoRelayNotReady, DuoRelayAPNsEnvironmentFailing) fire where nothing
    /// probes `/readyz`. Nothing here asks `/readyz`.
    @Test func readinessAndEnvironmentGaugesWithoutAProbe() throws {
        let fixture = try PushFixture(
            relayConfig: Self.limits + #","metrics_listen":"127.0.0.1:0""#, apnsConfig: #""timeout_ms":1000"#)
        let metricsPort = try #require(
            fixture.relay.standardError.split(separator: "\n").first { $0.contains("metrics on") }
                .flatMap { $0.split(separator: ":").last }.flatMap { UInt16($0.prefix { $0.isNumber }) })
        func gauges() throws -> [String] {
            let text = try RawHTTPClient(port: metricsPort).request("GET", "/metrics").text
            #expect(text.contains("# TYPE duo_relay_ready gauge"))
            #expect(text.contains("# TYPE duo_relay_apns_environment_state gauge"))
            return text.split(separator: "\n").map(String.init).filter {
                $0.hasPrefix("duo_relay_ready ") || $0.hasPrefix("duo_relay_apns_environment_state{")
            }
        }
        func state(_ state: String) -> String {
            #"duo_relay_apns_environment_state{environment="sandbox",state="\#(state)"} "#
        }
        #expect(
            try gauges() == ["duo_relay_ready 1", state("idle") + "1", state("ready") + "0", state("failing") + "0"])
        let connection = try fixture.relay.connect()
        let grant = try fixture.grant(token: randomToken(), on: connection)
        #expect(try fixture.push(grant: grant, on: connection).status == 200)
        #expect(
            try gauges() == ["duo_relay_ready 1", state("idle") + "0", state("ready") + "1", state("failing") + "0"])
        fixture.simulator.stop()
        #expect(try fixture.push(grant: grant, on: connection).status == 502)
        #expect(
            try gauges() == ["duo_relay_ready 1", state("idle") + "0", state("ready") + "0", state("failing") + "1"])
        let revived = try APNsSimulator(configuration: fixture.simulatorConfiguration)
        defer { revived.stop() }
        try Poll.wait(for: "the environment ready again", within: .seconds(15)) {
            (try? gauges()) == ["duo_relay_ready 1", state("idle") + "0", state("ready") + "1", state("failing") + "0"]
        }
        let text = try RawHTTPClient(port: metricsPort).request("GET", "/metrics").text
        #expect(!text.contains(#"endpoint="readyz""#), "something asked /readyz")
    }

    @Test func sighupRotatesRelayKeysUnderLoadWithoutAFailedRequest() throws {
        var secrets = TestSecrets()
        let directory = try RelayProcess.temporaryDirectory()
        let keysFile = directory.appendingPathComponent("relay_keys").path
        try secrets.relayKeysJSON.write(toFile: keysFile, atomically: true, encoding: .utf8)
        let fixture = try PushFixture(
            relayConfig: Self.limits, secrets: secrets,
            relayEnvironment: ["RELAY_KEYS": "", "RELAY_KEYS_FILE": keysFile])
        let oldGrant = try fixture.grant(token: randomToken())
        let load = LoadLoop(fixture: fixture, grant: oldGrant)
        try load.start()
        try Poll.wait(for: "the load under way", within: .seconds(10)) { load.completed >= 10 }
        // Add key 2 and seal with it: one reload.
        secrets.relayKeys[2] = SecureRandom.bytes(count: 32)
        try secrets.relayKeysJSON.write(toFile: keysFile, atomically: true, encoding: .utf8)
        let configPath = fixture.relay.directory.appendingPathComponent("relay.json").path
        var config = try String(contentsOfFile: configPath, encoding: .utf8)
        config = config.replacingOccurrences(of: #""listen""#, with: #""grant_key_id":2,"listen""#)
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        fixture.relay.signal(SIGHUP)
        try Poll.wait(for: "\"reloaded\" printed", within: .seconds(10)) {
            fixture.relay.standardError.contains("reloaded")
        }
        let newGrant = try fixture.grant(token: randomToken())
        #expect(Base64.urlDecode(newGrant)?[1] == 2)
        #expect(try fixture.push(grant: oldGrant).status == 200)
        #expect(try fixture.push(grant: newGrant).status == 200)
        // A broken reload keeps the running keys and says why in one line.
        try "{broken".write(toFile: keysFile, atomically: true, encoding: .utf8)
        fixture.relay.signal(SIGHUP)
        try Poll.wait(for: "\"reload refused\" printed", within: .seconds(10)) {
            fixture.relay.standardError.contains("reload refused")
        }
        #expect(try fixture.push(grant: newGrant).status == 200)
        // Remove key 1: its grants stop opening.
        secrets.relayKeys[1] = nil
        try secrets.relayKeysJSON.write(toFile: keysFile, atomically: true, encoding: .utf8)
        let results = load.stop()
        fixture.relay.signal(SIGHUP)
        try Poll.wait(for: "two reloaded lines", within: .seconds(10)) {
            fixture.relay.standardError.components(separatedBy: "reloaded").count == 3
        }
        #expect(try fixture.push(grant: oldGrant).error == "grant_invalid")
        #expect(try fixture.push(grant: newGrant).status == 200)
        #expect(results.count > 10)
        #expect(results.allSatisfy { $0 == 200 }, "\(Set(results))")
    }

    /// A relay whose sandbox key and key id come from files (returned, to be replaced before a SIGHUP), and a
    /// simulator that accepts both `secrets`' key and `newKey` (as `NEWKEY0002`).
    static func relayWithAPNsKeyFiles(
        _ secrets: TestSecrets, accepting newKey: P256.Signing.PrivateKey
    ) throws -> (fixture: PushFixture, keyFile: String, idFile: String) {
        let directory = try RelayProcess.temporaryDirectory()
        let keyFile = directory.appendingPathComponent("apns.p8").path
        try secrets.apnsKey.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
        let idFile = directory.appendingPathComponent("apns.id").path
        try secrets.keyID.write(toFile: idFile, atomically: true, encoding: .utf8)
        let fixture = try PushFixture(
            relayConfig: limits, secrets: secrets,
            simulatorKeys: [secrets.keyID: secrets.apnsKey.publicKey, "NEWKEY0002": newKey.publicKey],
            relayEnvironment: [
                "APNS_KEY_SANDBOX": "", "APNS_KEY_SANDBOX_FILE": keyFile, "APNS_KEY_ID_SANDBOX": "",
                "APNS_KEY_ID_SANDBOX_FILE": idFile,
            ])
        return (fixture, keyFile, idFile)
    }

    @Test func sighupRotatesTheAPNsKey() throws {
        var secrets = TestSecrets()
        let newKey = P256.Signing.PrivateKey()
        let (fixture, keyFile, idFile) = try Self.relayWithAPNsKeyFiles(secrets, accepting: newKey)
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)
        secrets.apnsKey = newKey
        try newKey.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
        try "NEWKEY0002".write(toFile: idFile, atomically: true, encoding: .utf8)
        fixture.relay.signal(SIGHUP)
        try Poll.wait(for: "\"reloaded\" printed", within: .seconds(10)) {
            fixture.relay.standardError.contains("reloaded")
        }
        #expect(try fixture.push(grant: grant).status == 200)
        let keyIDs = fixture.waitForDeliveries(2).map(\.keyID)
        #expect(keyIDs == ["TESTKEY001", "NEWKEY0002"])
        let reloaded = fixture.relay.standardError.split(separator: "\n").filter { $0.contains("reloaded: ") }
        #expect(reloaded.count == 1)
        #expect(reloaded.first?.hasSuffix("environments sandbox (key id NEWKEY0002)") == true, "\(reloaded)")
    }

    /// An APNs key and its id change together or the reload is refused (docs/DESIGN.md, "Lifecycle"): a new key under
    /// the running id, or the running key under a new id, would make APNs refuse every push. The refusal names the
    /// environment, and the running key keeps delivering; a whole change afterwards is taken.
    @Test(arguments: ["new key under the old id", "new id with the old key"])
    func sighupRefusesAnAPNsKeyAndIdThatDoNotChangeTogether(_ change: String) throws {
        let secrets = TestSecrets()
        let newKey = P256.Signing.PrivateKey()
        let (fixture, keyFile, idFile) = try Self.relayWithAPNsKeyFiles(secrets, accepting: newKey)
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)
        let variable: String
        if change == "new key under the old id" {
            try newKey.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
            variable = "APNS_KEY_SANDBOX: sandbox: a new key under the running key id TESTKEY001"
        } else {
            try "NEWKEY0002".write(toFile: idFile, atomically: true, encoding: .utf8)
            variable = "APNS_KEY_ID_SANDBOX: sandbox: a new key id NEWKEY0002 with the running key (id TESTKEY001)"
        }
        fixture.relay.signal(SIGHUP)
        try Poll.wait(for: "\"reload refused\" printed", within: .seconds(10)) {
            fixture.relay.standardError.contains("reload refused")
        }
        let refused = fixture.relay.standardError.split(separator: "\n").filter { $0.contains("reload refused") }
        #expect(refused.count == 1)
        #expect(
            refused.first?.contains("keeping the running configuration and keys: " + variable) == true, "\(refused)")
        #expect(!fixture.relay.standardError.contains("reloaded: "))
        // The running key keeps delivering, with the running id.
        #expect(try fixture.push(grant: grant).status == 200)
        #expect(try fixture.push(grant: grant).status == 200)
        #expect(fixture.waitForDeliveries(3).map(\.keyID) == ["TESTKEY001", "TESTKEY001", "TESTKEY001"])
        // Key and id changed together: taken.
        try newKey.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
        try "NEWKEY0002".write(toFile: idFile, atomically: true, encoding: .utf8)
        fixture.relay.signal(SIGHUP)
        try Poll.wait(for: "\"reloaded\" printed", within: .seconds(10)) {
            fixture.relay.standardError.contains("reloaded: ")
        }
        #expect(fixture.relay.standardError.contains("environments sandbox (key id NEWKEY0002)"))
        #expect(try fixture.push(grant: grant).status == 200)
        #expect(fixture.waitForDeliveries(4).last?.keyID == "NEWKEY0002")
    }

    /// In either log format: nothing identifying in any line, and every line a log line of that format.
    @Test(arguments: LogLine.Format.allCases)
    func privacyAcrossAFullScenario(_ format: LogLine.Format) throws {
        let secrets = TestSecrets()
        let fixture = try PushFixture(
            relayConfig:
                #""ip_limit":{"requests":40,"period_s":60,"block_s":60},"push_limit":{"requests":3,"period_s":60},"#
                + #""log":{"format":"\#(format)"}"#,
            apnsConfig: #""timeout_ms":800"#, secrets: secrets)
        let connection = try fixture.relay.connect()
        let token = randomToken()
        let grant = try fixture.grant(token: token, on: connection)
        let ids = (0..<8).map { _ in PushFixture.hex64() }
        let thread = PushFixture.hex64()
        var seen: [String] =
            [token, token.uppercased(), grant, thread, PushFixture.sealed] + ids + secrets.secretStrings
        let bodies: [[UInt8]] = [
            PushFixture.pushBody(grant: grant, id: ids[0], thread: thread),
            PushFixture.pushBody(grant: grant + "x", id: ids[1], thread: thread),
            PushFixture.pushBody(grant: grant, id: ids[2], thread: "zz"),
            Array(#"{"token":"\#(token)"}"#.utf8),
        ]
        for body in bodies { _ = try connection.request("POST", "/v1/push", body: body) }
        fixture.simulator.inject(.status(410, reason: "Unregistered"))
        _ = try connection.request(
            "POST", "/v1/push", body: PushFixture.pushBody(grant: grant, id: ids[3], thread: thread))
        fixture.simulator.inject(.stall)
        _ = try connection.request(
            "POST", "/v1/push", body: PushFixture.pushBody(grant: grant, id: ids[4], thread: thread))
        _ = try connection.request(
            "POST", "/v1/push", body: PushFixture.pushBody(grant: grant, id: ids[5], thread: thread))
        _ = try connection.request(
            "POST", "/v1/grant", body: Array(#"{"token":"\#(token)","environment":"production"}"#.utf8))
        // Exhaust the per-address limit, with a forged header that must not be trusted or printed.
        for _ in 0..<40 {
            _ = try connection.request(
                "POST", "/v1/grant", body: Array("x".utf8), headers: ["X-Forwarded-For": "198.51.100.77"])
        }
        seen.append("198.51.100.77")
        seen.append("127.0.0.1:\(connection.localPort)")
        fixture.relay.signal(SIGTERM)
        #expect(try fixture.relay.waitForExit() == 0)
        // As printed, not as a test reads it back.
        let output = fixture.relay.standardOutput + fixture.relay.rawStandardError
        #expect(output.contains("stopped"))
        for secret in seen { #expect(!output.contains(secret), "printed: \(secret.prefix(12))…") }
        let lines = fixture.relay.rawStandardError.split(separator: "\n")
        #expect(lines.count >= 8, "\(lines)")
        #expect(RelayProcess.logLineProblems(fixture.relay.rawStandardError, format: format).isEmpty)
        let parsed = lines.compactMap { LogLine.parse($0) }
        #expect(parsed.count == lines.count)
        #expect(
            parsed.contains {
                $0.event == "listening" && $0.fields == [LogLine.Field("address", "127.0.0.1:\(fixture.relay.port)")]
            } || format == .text)
        #expect(parsed.last?.message.hasPrefix("stopped; ") == true)
        #expect(parsed.allSatisfy { $0.level == .info || $0.level == .warning }, "\(parsed.map(\.message))")
    }
}

/// Pushes in a loop on four threads until stopped; collects every status.
final class LoadLoop: @unchecked Sendable {
    // @unchecked: `statuses`, `running` and `threads` are only touched under `lock`.
    private let fixture: PushFixture
    private let grant: String
    private let lock = NSLock()
    private var statuses: [Int] = []
    private var running = true
    private var threads: [JoinableThread] = []

    init(fixture: PushFixture, grant: String) {
        self.fixture = fixture
        self.grant = grant
    }

    /// How many pushes have been answered so far.
    var completed: Int {
        lock.lock()
        defer { lock.unlock() }
        return statuses.count
    }

    private var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        return running
    }

    func start() throws {
        for _ in 0..<4 {
            let thread = try JoinableThread { [self] in
                guard let connection = try? fixture.relay.connect() else { return }
                while isRunning {
                    let status = (try? fixture.push(grant: grant, on: connection).status) ?? -1
                    lock.lock()
                    statuses.append(status)
                    lock.unlock()
                }
            }
            lock.lock()
            threads.append(thread)
            lock.unlock()
        }
    }

    /// Stops the threads and joins them (so that none holds the fixture after the test); every status.
    func stop() -> [Int] {
        lock.lock()
        running = false
        let started = threads
        threads = []
        lock.unlock()
        for thread in started { thread.join() }
        lock.lock()
        defer { lock.unlock() }
        return statuses
    }
}
