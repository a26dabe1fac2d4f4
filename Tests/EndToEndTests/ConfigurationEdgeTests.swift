import Foundation
import RelayCrypto
import Testing

/// `check` on the edges of the configuration and the secrets: duplicates and what is not JSON are
/// refused where they are, CRLF endings are not part of a secret, unreadable credentials are errors, and no
/// secret, nor any part of one, is ever printed, wherever it was put by mistake.
@Suite struct ConfigurationEdgeTests {
    let secrets = TestSecrets()
    let directory: URL

    init() throws {
        directory = try RelayProcess.temporaryDirectory()
    }

    func write(_ text: String, _ name: String) throws -> String {
        let path = directory.appendingPathComponent(name).path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// `duo-relay check` with `config` and the secrets, with `changes` applied (nil removes a variable).
    func check(config: String = RelayProcess.config(), _ changes: [String: String?] = [:]) throws -> (
        status: Int32, output: String
    ) {
        let path = try write(config, "relay-\(UUID().uuidString).json")
        var environment = secrets.environment
        for (name, value) in changes { environment[name] = value }
        let result = try CommandRun.run(["check", "--config", path], environment: environment)
        return (result.status, result.output)
    }

    @Test(arguments: [
        (#"{"listen":"127.0.0.1:1","listen":"127.0.0.1:2","apns":{"topic":"app.openduo.pocket"}}"#, "listen:"),
        (#"{"apns":{"topic":"app.openduo.pocket"},"apns":{"topic":"app.other"}}"#, "apns:"),
        (#"{"apns":{"topic":"app.openduo.pocket","topic":"app.other"}}"#, "apns.topic:"),
        (#"{"apns":{"topic":"a.b"},"ip_limit":{"requests":1,"requests":2}}"#, "ip_limit.requests:"),
    ])
    func aKeyGivenTwiceIsRefusedByName(_ config: String, _ subject: String) throws {
        let result = try check(config: config)
        #expect(result.status == 1)
        #expect(result.output.contains("check failed: \(subject) is given more than once"), "\(result.output)")
    }

    @Test func aRelayKeyIDGivenTwiceIsRefused() throws {
        let key = Base64.urlEncode(SecureRandom.bytes(count: 32))
        let other = Base64.urlEncode(SecureRandom.bytes(count: 32))
        let result = try check(["RELAY_KEYS": #"{"1":"\#(key)","1":"\#(other)"}"#])
        #expect(result.status == 1)
        #expect(result.output.contains("RELAY_KEYS: member 1 is given more than once"), "\(result.output)")
        #expect(!result.output.contains(key) && !result.output.contains(other))
    }

    @Test(arguments: [
        (#"{"apns":{"topic":"app.openduo.pocket"},}"#, "line 1, column 40"),
        (
            "{\n  \"apns\": {\"topic\": \"app.openduo.pocket\"},\n  \"listen\": \"127.0.0.1:0\",\n}\n",
            "line 4, column 1"
        ),
        ("{\"apns\": {\"topic\": \"app.openduo.pocket\"}} x", "line 1, column 43"),
        ("{\"apns\": [1,]}", "line 1, column 13"),
        ("{\"apns\": {'topic': 1}}", "line 1, column 11"),
    ])
    func notJSONIsRefusedWithItsPosition(_ config: String, _ position: String) throws {
        let result = try check(config: config)
        #expect(result.status == 1)
        #expect(result.output.contains("check failed: config: is not JSON: \(position):"), "\(result.output)")
    }

    /// A trailing `\n` or `\r\n` is not part of a secret, in a variable or in a file.
    @Test func crlfEndingsAreStripped() throws {
        let teamFile = try write(secrets.teamID + "\r\n", "team")
        let keysFile = try write(secrets.relayKeysJSON + "\r\n", "keys")
        let keyFile = try write(secrets.apnsKey.pemRepresentation + "\r\n", "apns.p8")
        let result = try check([
            "APNS_KEY_ID_SANDBOX": secrets.keyID + "\r\n", "APNS_TEAM_ID": nil, "APNS_TEAM_ID_FILE": teamFile,
            "RELAY_KEYS": nil, "RELAY_KEYS_FILE": keysFile, "APNS_KEY_SANDBOX": nil, "APNS_KEY_SANDBOX_FILE": keyFile,
        ])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("check: ok"))
        #expect(result.output.contains("key id \(secrets.keyID))"))
    }

    /// A systemd credential that is there but cannot be read is an error naming it, like a `NAME_FILE` naming a
    /// missing file; an absent one is simply absent.
    @Test(arguments: ["directory", "dangling link"])
    func anUnreadableCredentialIsAnError(_ kind: String) throws {
        let credentials = directory.appendingPathComponent("credentials-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: credentials, withIntermediateDirectories: true)
        let entry = credentials.appendingPathComponent("APNS_KEY_PRODUCTION")
        if kind == "directory" {
            try FileManager.default.createDirectory(at: entry, withIntermediateDirectories: true)
        } else {
            try FileManager.default.createSymbolicLink(
                atPath: entry.path, withDestinationPath: credentials.appendingPathComponent("gone").path)
        }
        let result = try check(["CREDENTIALS_DIRECTORY": credentials.path])
        #expect(result.status == 1, "\(result.output)")
        #expect(result.output.contains("check failed: APNS_KEY_PRODUCTION: "), "\(result.output)")
        try FileManager.default.removeItem(at: entry)
        #expect(try check(["CREDENTIALS_DIRECTORY": credentials.path]).status == 0)
        let missing = try check(["APNS_KEY_PRODUCTION_FILE": credentials.appendingPathComponent("nope").path])
        #expect(missing.status == 1)
        #expect(missing.output.contains("check failed: APNS_KEY_PRODUCTION_FILE: "), "\(missing.output)")
    }

    /// The secret material of a value: what must never appear in output, not even in part.
    static func material(_ secret: String) -> String {
        secret.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    }

    /// Whether `output` holds any 6 consecutive characters of `secret`'s material.
    static func leaks(_ output: String, _ secret: String) -> String? {
        let characters = Array(material(secret))
        guard characters.count >= 6 else { return output.contains(secret) ? secret : nil }
        for start in 0...(characters.count - 6) {
            let window = String(characters[start..<(start + 6)])
            if output.contains(window) { return window }
        }
        return nil
    }

    /// Every secret in every place it does not belong: each is refused, and the output holds no part of it.
    @Test func noPartOfASecretIsEverPrinted() throws {
        let relayKey = Base64.urlEncode(secrets.relayKeys[1]!)
        let pem = secrets.apnsKey.pemRepresentation
        let pemBody = Self.material(pem)
        // The shared store's AUTH password (REDIS_PASSWORD): 24 random characters of base64url.
        let redisPassword = String(Base64.urlEncode(SecureRandom.bytes(count: 18)))
        var cases: [(String, [String: String?], String)] = []
        for secret in [relayKey, pem, pemBody, redisPassword] {
            for place in ["APNS_KEY_ID_SANDBOX", "APNS_TEAM_ID"] {
                cases.append(("secret as \(place)", [place: secret], ""))
            }
            cases.append(("secret as RELAY_KEYS", ["RELAY_KEYS": secret], ""))
            cases.append(("secret as a RELAY_KEYS id", ["RELAY_KEYS": #"{"\#(secret)":"1"}"#], ""))
            cases.append(
                ("secret as a RELAY_KEYS id twice", ["RELAY_KEYS": #"{"\#(secret)":"1","\#(secret)":"2"}"#], ""))
            cases.append(("secret as RELAY_KEYS, unquoted", ["RELAY_KEYS": "{\(secret)}"], ""))
            cases.append(("secret as RELAY_KEYS, in an array", ["RELAY_KEYS": #"["\#(secret)"]"#], ""))
            cases.append(("secret as APNS_KEY_PRODUCTION without an id", ["APNS_KEY_PRODUCTION": secret], ""))
            cases.append(("secret as a _FILE path", ["APNS_KEY_PRODUCTION_FILE": secret], ""))
            cases.append(("secret as a config key", [:], #"{"apns":{"topic":"a.b"},"\#(secret)":1}"#))
            cases.append(
                ("secret as a config key twice", [:], #"{"apns":{"topic":"a.b"},"\#(secret)":1,"\#(secret)":1}"#))
            cases.append(("secret as an apns key", [:], #"{"apns":{"topic":"a.b","\#(secret)":1}}"#))
            cases.append(("secret as listen", [:], #"{"apns":{"topic":"a.b"},"listen":"\#(secret)"}"#))
            cases.append(("secret as an origin", [:], #"{"apns":{"topic":"a.b","sandbox_origin":"\#(secret)"}}"#))
            cases.append(("secret as grant_key_id", [:], #"{"apns":{"topic":"a.b"},"grant_key_id":"\#(secret)"}"#))
            cases.append(("secret unquoted in the config", [:], #"{"apns":{"topic":"a.b"},"listen":\#(secret)}"#))
        }
        // The Redis password where the configuration file would show it: in the store's URL.
        let store = #"{"apns":{"topic":"a.b"},"limits_store":{"kind":"redis","url":"#
        for url in [
            "redis://:\(redisPassword)@127.0.0.1:6379/0", "redis://\(redisPassword)@127.0.0.1:6379/0",
            "rediss://user:\(redisPassword)@127.0.0.1:6380", "redis://127.0.0.1:\(redisPassword)/0",
            "redis://127.0.0.1:6379/\(redisPassword)", "\(redisPassword)",
        ] {
            cases.append(("Redis password in limits_store.url", [:], store + #""\#(url)"}}"#))
        }
        cases.append(
            (
                "Redis password as limits_store.kind", [:],
                #"{"apns":{"topic":"a.b"},"limits_store":{"kind":"\#(redisPassword)"}}"#
            ))
        // The APNs key in the place of the relay key, and the relay key in the place of the APNs key.
        cases.append(("PEM as a relay key", ["RELAY_KEYS": #"{"1":"\#(pemBody)"}"#], ""))
        cases.append(("relay key as the APNs key", ["APNS_KEY_SANDBOX": relayKey], ""))
        for (name, changes, config) in cases {
            let result = try check(config: config.isEmpty ? RelayProcess.config() : config, changes)
            #expect(result.status == 1, "\(name): accepted")
            for secret in [relayKey, pem, redisPassword] {
                let leaked = Self.leaks(result.output, secret)
                #expect(leaked == nil, "\(name): printed \(leaked ?? "")")
            }
        }
    }
}
