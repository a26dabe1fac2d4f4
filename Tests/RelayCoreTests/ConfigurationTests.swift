import RelayCore
import RelayCrypto
import Testing

@Suite struct ConfigurationTests {
    func parse(_ text: String) throws(ConfigurationError) -> RelayConfiguration {
        try RelayConfiguration.parse(Array(text.utf8))
    }

    @Test func defaults() throws {
        let config = try parse(#"{"apns":{"topic":"app.openduo.pocket"}}"#)
        #expect(config.listen == ListenAddress(host: "127.0.0.1", port: 8787))
        #expect(config.grantLifetimeSeconds == 2_592_000)
        #expect(config.grantKeyID == 1)
        #expect(config.pushLimit == LimitPolicy(requests: 20, periodSeconds: 60))
        #expect(config.ipLimit == LimitPolicy(requests: 10, periodSeconds: 10, blockSeconds: 10))
        #expect(config.clientIPHeader == nil)
        #expect(config.apns.placeholder == "PUSH")
        #expect(config.apns.expirationSeconds == 86_400)
        #expect(config.apns.sandboxOrigin == "https://api.sandbox.push.apple.com")
        #expect(config.apns.productionOrigin == "https://api.push.apple.com")
        #expect(config.apns.caFile == nil)
        #expect(config.apns.timeoutMilliseconds == 10_000)
    }

    @Test func aLimitBlockGivenInPartKeepsTheDefaultsOfWhatItLeavesOut() throws {
        let config = try parse(
            #"{"apns":{"topic":"app.openduo.pocket"},"push_limit":{"requests":5},"ip_limit":{"period_s":30}}"#)
        #expect(config.pushLimit == LimitPolicy(requests: 5, periodSeconds: 60))
        #expect(config.ipLimit == LimitPolicy(requests: 10, periodSeconds: 30, blockSeconds: 10))
        let empty = try parse(#"{"apns":{"topic":"app.openduo.pocket"},"push_limit":{},"ip_limit":{}}"#)
        #expect(empty.pushLimit == RelayConfiguration().pushLimit)
        #expect(empty.ipLimit == RelayConfiguration().ipLimit)
    }

    @Test func designExampleParses() throws {
        let config = try parse(
            """
            {
              "listen": "[::1]:9000",
              "grant_lifetime_s": 100,
              "grant_key_id": 0,
              "push_limit": { "requests": 5, "period_s": 30 },
              "ip_limit": { "requests": 3, "period_s": 2, "block_s": 4, "client_ip_header": "X-Forwarded-For" },
              "apns": {
                "topic": "app.openduo.pocket", "placeholder": "PUSH.new_1", "expiration_s": 0,
                "sandbox_origin": "https://127.0.0.1:4443", "production_origin": "https://[::1]:4444",
                "ca_file": "/tmp/ca.pem", "timeout_ms": 500
              }
            }
            """)
        #expect(config.listen == ListenAddress(host: "::1", port: 9000))
        #expect(config.grantKeyID == 0)
        #expect(config.pushLimit == LimitPolicy(requests: 5, periodSeconds: 30))
        #expect(config.ipLimit == LimitPolicy(requests: 3, periodSeconds: 2, blockSeconds: 4))
        #expect(config.clientIPHeader == "X-Forwarded-For")
        #expect(config.apns.origin(.sandbox) == "https://127.0.0.1:4443")
        #expect(config.apns.caFile == "/tmp/ca.pem")
        #expect(config.apns.timeoutMilliseconds == 500)
    }

    @Test(arguments: [
        ("nope", "config"),
        ("[]", "config"),
        (#"{}"#, "apns.topic"),
        (#"{"apns":{}}"#, "apns.topic"),
        (#"{"apns":{"topic":"a","topc":"b"}}"#, "apns.topc"),
        (#"{"apns":{"topic":"a"},"lisen":"x"}"#, "lisen"),
        (#"{"apns":{"topic":"a"},"listen":"localhost"}"#, "listen"),
        (#"{"apns":{"topic":"a"},"listen":"::1:80"}"#, "listen"),
        (#"{"apns":{"topic":"a"},"listen":"1.2.3.4:99999"}"#, "listen"),
        (#"{"apns":{"topic":"a"},"listen":"1.2.3.4:+80"}"#, "listen"),
        (#"{"apns":{"topic":"a"},"grant_key_id":256}"#, "grant_key_id"),
        (#"{"apns":{"topic":"a"},"grant_key_id":"1"}"#, "grant_key_id"),
        (#"{"apns":{"topic":"a"},"grant_lifetime_s":1.5}"#, "grant_lifetime_s"),
        (#"{"apns":{"topic":"a"},"grant_lifetime_s":true}"#, "grant_lifetime_s"),
        (#"{"apns":{"topic":"a"},"push_limit":{"requests":0}}"#, "push_limit.requests"),
        (#"{"apns":{"topic":"a"},"push_limit":{"period":1}}"#, "push_limit.period"),
        (#"{"apns":{"topic":"a"},"ip_limit":{"client_ip_header":"X Real"}}"#, "ip_limit.client_ip_header"),
        (#"{"apns":{"topic":"a","placeholder":"has space"}}"#, "apns.placeholder"),
        (#"{"apns":{"topic":"a","placeholder":"\#(String(repeating: "P", count: 200))"}}"#, "apns.placeholder"),
        (#"{"apns":{"topic":"a","sandbox_origin":"http://x"}}"#, "apns.sandbox_origin"),
        (#"{"apns":{"topic":"a","production_origin":"https://x/path"}}"#, "apns.production_origin"),
        (#"{"apns":{"topic":"a","timeout_ms":0}}"#, "apns.timeout_ms"),
        (#"{"apns":{"topic":"a"},"server":{"threads":0}}"#, "server.threads"),
    ])
    func rejected(_ text: String, _ subject: String) {
        do {
            _ = try parse(text)
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.subject == subject)
            #expect(!error.description.contains("\n"))
        }
    }
}

@Suite struct SecretsTests {
    static let apnsKey = P256.Signing.PrivateKey()
    static let relayKey = Base64.urlEncode(SecureRandom.bytes(count: 32))

    func source(_ env: [String: String], files: [String: String] = [:]) -> SecretSource {
        SecretSource(environment: env) { path in
            guard let text = files[path] else { throw ConfigurationError(.unreadable, path, "no such file") }
            return text
        }
    }

    var validEnvironment: [String: String] {
        [
            "APNS_KEY_SANDBOX": Self.apnsKey.pemRepresentation, "APNS_KEY_ID_SANDBOX": "ABCDE12345",
            "APNS_TEAM_ID": "TEAM123456", "RELAY_KEYS": #"{"1":"\#(Self.relayKey)"}"#,
        ]
    }

    func failure(_ env: [String: String], files: [String: String] = [:]) -> ConfigurationError? {
        do {
            _ = try RelaySecrets.load(from: source(env, files: files))
            return nil
        } catch {
            return error
        }
    }

    @Test func valid() throws {
        let secrets = try RelaySecrets.load(from: source(validEnvironment))
        #expect(secrets.environments == [.sandbox])
        #expect(secrets.relayKeys.ids == [1])
        #expect(secrets.teamID == "TEAM123456")
        let setup = try RelaySetup(configuration: RelayConfiguration(topic: "app.openduo.pocket"), secrets: secrets)
        let summary = setup.summary.joined(separator: "\n")
        #expect(summary.contains("sandbox (key id ABCDE12345)"))
        #expect(!summary.contains(Self.relayKey))
        #expect(!summary.contains("PRIVATE KEY"))
    }

    @Test func rejectedNamesTheVariableNotTheValue() {
        var env = validEnvironment
        let cases: [(String, String?, String)] = [
            ("RELAY_KEYS", nil, "RELAY_KEYS"),
            ("RELAY_KEYS", "[1]", "RELAY_KEYS"),
            ("RELAY_KEYS", #"{"1":"short"}"#, "RELAY_KEYS"),
            ("RELAY_KEYS", #"{"256":"\#(Self.relayKey)"}"#, "RELAY_KEYS"),
            ("RELAY_KEYS", #"{"01":"\#(Self.relayKey)"}"#, "RELAY_KEYS"),
            ("RELAY_KEYS", #"{"1":"\#(Base64.urlEncode(SecureRandom.bytes(count: 16)))"}"#, "RELAY_KEYS"),
            ("APNS_KEY_SANDBOX", "not a key", "APNS_KEY_SANDBOX"),
            ("APNS_KEY_ID_SANDBOX", "short", "APNS_KEY_ID_SANDBOX"),
            ("APNS_KEY_ID_SANDBOX", "abcde12345", "APNS_KEY_ID_SANDBOX"),
            ("APNS_KEY_ID_SANDBOX", nil, "APNS_KEY_ID_SANDBOX"),
            ("APNS_KEY_ID_SANDBOX", "", "APNS_KEY_ID_SANDBOX"),
            ("APNS_TEAM_ID", nil, "APNS_TEAM_ID"),
            ("APNS_TEAM_ID", "TEAM12345!", "APNS_TEAM_ID"),
        ]
        for (name, value, subject) in cases {
            env = validEnvironment
            env[name] = value
            let error = failure(env)
            #expect(error?.subject == subject, "\(name)")
            if let value, value.count > 4, let error {
                #expect(!error.description.contains(value))
            }
        }
        env = validEnvironment
        env["APNS_KEY_SANDBOX"] = nil
        env["APNS_KEY_ID_SANDBOX"] = nil
        #expect(failure(env)?.code == .missing)
        env = validEnvironment
        env["APNS_KEY_SANDBOX"] = nil
        #expect(failure(env)?.subject == "APNS_KEY_SANDBOX")
    }

    @Test func rsaAndOtherCurvesAreRefused() throws {
        var env = validEnvironment
        env["APNS_KEY_SANDBOX"] = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"
        #expect(failure(env)?.subject == "APNS_KEY_SANDBOX")
    }

    @Test func fromFilesAndCredentials() throws {
        var env = validEnvironment
        let keys = env.removeValue(forKey: "RELAY_KEYS")!
        env["RELAY_KEYS_FILE"] = "/run/secrets/relay_keys"
        let secrets = try RelaySecrets.load(from: source(env, files: ["/run/secrets/relay_keys": keys + "\n"]))
        #expect(secrets.relayKeys.ids == [1])

        env["RELAY_KEYS"] = keys
        #expect(failure(env, files: ["/run/secrets/relay_keys": keys])?.subject == "RELAY_KEYS")

        env = validEnvironment
        env["RELAY_KEYS"] = nil
        env["CREDENTIALS_DIRECTORY"] = "/run/credentials/duo-relay.service"
        #expect(throws: Never.self) {
            try RelaySecrets.load(from: source(env, files: ["/run/credentials/duo-relay.service/RELAY_KEYS": keys]))
        }
        env["RELAY_KEYS_FILE"] = "/missing"
        #expect(failure(env, files: [:])?.subject == "RELAY_KEYS_FILE")
    }

    @Test func grantKeyMustBeHeld() throws {
        let secrets = try RelaySecrets.load(from: source(validEnvironment))
        var config = RelayConfiguration(topic: "t")
        config.grantKeyID = 2
        #expect(throws: ConfigurationError(.invalid, "grant_key_id", "")) {
            try RelaySetup(configuration: config, secrets: secrets)
        }
    }
}

@Suite struct LimitsStoreConfigurationTests {
    func parse(_ block: String) throws(ConfigurationError) -> LimitsStore {
        try RelayConfiguration.parse(Array(#"{"apns":{"topic":"t"},"limits_store":\#(block)}"#.utf8)).limitsStore
    }

    func failure(_ block: String) -> ConfigurationError? {
        do {
            _ = try parse(block)
            return nil
        } catch {
            return error
        }
    }

    @Test func absentMeansMemory() throws {
        let config = try RelayConfiguration.parse(Array(#"{"apns":{"topic":"t"}}"#.utf8))
        #expect(config.limitsStore == LimitsStore())
        #expect(config.limitsStore.kind == .memory)
    }

    @Test func designExampleParses() throws {
        let store = try parse(
            """
            { "kind": "redis", "url": "redis://127.0.0.1:6379/0", "username": null, "timeout_ms": 100,
              "on_failure": "local", "key_prefix": "duo-relay:", "ca_file": null }
            """)
        #expect(store.kind == .redis)
        #expect(store.url == RedisURL(host: "127.0.0.1", port: 6379, database: 0, tls: false))
        #expect(store.timeoutMilliseconds == 100)
        #expect(store.onFailure == .local)
        #expect(store.keyPrefix == "duo-relay:")
    }

    @Test func tlsURLWithUserCAAndRefuse() throws {
        let store = try parse(
            #"{"kind":"redis","url":"rediss://[::1]:6380/3","username":"relay","ca_file":"/ca.pem","on_failure":"refuse"}"#
        )
        #expect(store.url == RedisURL(host: "::1", port: 6380, database: 3, tls: true))
        #expect(store.username == "relay")
        #expect(store.caFile == "/ca.pem")
        #expect(store.onFailure == .refuse)
        #expect(try parse(#"{"kind":"redis","url":"redis://cache.internal"}"#).url?.port == 6379)
    }

    @Test func aURLWithAPasswordIsRefusedWithoutRepeatingIt() {
        let error = failure(#"{"kind":"redis","url":"redis://user:hunter2secret@127.0.0.1:6379/0"}"#)
        #expect(error?.subject == "limits_store.url")
        #expect(error?.description.contains("REDIS_PASSWORD") == true)
        #expect(error?.description.contains("hunter2secret") == false)
        #expect(failure(#"{"kind":"redis","url":"redis://:hunter2secret@h"}"#)?.subject == "limits_store.url")
    }

    @Test(arguments: [
        (#"{"kind":"etcd"}"#, "limits_store.kind"),
        (#"{"kind":"redis"}"#, "limits_store.url"),
        (#"{"kind":"redis","url":"http://h:1"}"#, "limits_store.url"),
        (#"{"kind":"redis","url":"redis://h:0"}"#, "limits_store.url"),
        (#"{"kind":"redis","url":"redis://h:99999"}"#, "limits_store.url"),
        (#"{"kind":"redis","url":"redis://h/x"}"#, "limits_store.url"),
        (#"{"kind":"redis","url":"redis://relay@h"}"#, "limits_store.url"),
        (#"{"kind":"redis","url":"redis://h","timeout_ms":0}"#, "limits_store.timeout_ms"),
        (#"{"kind":"redis","url":"redis://h","on_failure":"ignore"}"#, "limits_store.on_failure"),
        (#"{"kind":"redis","url":"redis://h","key_prefix":"a b"}"#, "limits_store.key_prefix"),
        (#"{"kind":"redis","url":"redis://h","ca_file":"/ca.pem"}"#, "limits_store.ca_file"),
        (#"{"kind":"redis","url":"redis://h","tiemout_ms":5}"#, "limits_store.tiemout_ms"),
    ])
    func invalidBlocksNameTheirKey(block: String, key: String) {
        #expect(failure(block)?.subject == key)
    }

    /// Its forms are SecretFormsTests'.
    @Test func theRedisPasswordIsNeverInTheSummaryAndAUserNeedsOne() throws {
        let secrets = try SecretFormsTests.loadCredential("REDIS_PASSWORD", "fromsystemd\r\n")
        #expect(secrets.redisPassword == "fromsystemd")

        // A user name without a password cannot AUTH; the summary never shows the password.
        var config = try RelayConfiguration.parse(
            Array(#"{"apns":{"topic":"t"},"limits_store":{"kind":"redis","url":"redis://h","username":"u"}}"#.utf8))
        let setup = try RelaySetup(configuration: config, secrets: secrets)
        #expect(setup.summary.contains { $0.contains("redis redis://h:6379/0") && $0.contains("as user u") })
        #expect(!setup.summary.joined().contains("fromsystemd"))
        var withoutPassword = secrets
        withoutPassword.redisPassword = nil
        #expect(throws: ConfigurationError(.missing, "REDIS_PASSWORD", "")) {
            try RelaySetup(configuration: config, secrets: withoutPassword)
        }
        config.limitsStore = LimitsStore()
        #expect(
            try RelaySetup(configuration: config, secrets: withoutPassword).summary.last
                == "limits store: memory (this instance only)")
    }
}

/// `tls` (docs/DESIGN.md, "TLS"): both paths required, null or absent for plain HTTP, unknown keys refused.
@Suite struct TLSConfigurationTests {
    func check(_ tls: String) -> (RelayConfiguration, [String]) {
        let (config, problems) = RelayConfiguration.check(
            Array(#"{"apns":{"topic":"app.openduo.pocket"},"tls":\#(tls)}"#.utf8))
        return (config, problems.map(\.description))
    }

    @Test func bothPathsAreRead() {
        let (config, problems) = check(#"{"certificate_file":"/etc/relay/fullchain.pem","key_file":"/etc/k.pem"}"#)
        #expect(problems.isEmpty)
        #expect(config.tls == .init(certificateFile: "/etc/relay/fullchain.pem", keyFile: "/etc/k.pem"))
    }

    @Test func nullOrAbsentIsPlainHTTP() throws {
        let (config, problems) = check("null")
        #expect(problems.isEmpty)
        #expect(config.tls == nil)
        let absent = try RelayConfiguration.parse(Array(#"{"apns":{"topic":"app.openduo.pocket"}}"#.utf8))
        #expect(absent.tls == nil)
    }

    @Test(arguments: [
        (#"{"certificate_file":"/c.pem"}"#, "tls.key_file: is required with tls"),
        (#"{"key_file":"/k.pem"}"#, "tls.certificate_file: is required with tls"),
        (#"{"certificate_file":"","key_file":"/k.pem"}"#, "tls.certificate_file: must be a file path"),
        (
            #"{"certificate_file":"/c.pem","key_file":"/k.pem","ca_file":"/ca.pem"}"#,
            "tls.ca_file: is not a known configuration key"
        ),
        (#""/c.pem""#, "tls: must be a JSON object"),
        (#"{"certificate_file":1,"key_file":"/k.pem"}"#, "tls.certificate_file: must be a string"),
    ])
    func aProblemNamesItsKey(_ tls: String, _ problem: String) {
        let (config, problems) = check(tls)
        #expect(problems == [problem])
        // A key beside the paths is its own problem; the paths themselves were read.
        #expect((config.tls == nil) == !problem.contains("not a known"))
    }
}
