import RelayCrypto
import Testing

@testable import RelayCore

/// Every optional secret is read the same ways (docs/operations/configuration.md, "Secrets"): not set; its
/// variable; a file its `_FILE` variable names (one trailing line end dropped); both at once refused naming the
/// secret; systemd's credentials directory (a trailing CRLF dropped).
@Suite struct SecretFormsTests {
    struct Secret: Sendable, CustomTestStringConvertible {
        let name: String
        let value: @Sendable (RelaySecrets) -> String?
        /// What its file and its credential hold, and the values read from them.
        let file: (text: String, value: String)
        let credential: (text: String, value: String)
        let plain: String

        var testDescription: String { name }
    }

    static let secrets = [
        Secret(
            name: "REDIS_PASSWORD", value: { $0.redisPassword }, file: ("s3cret\n", "s3cret"),
            credential: ("fromsystemd\r\n", "fromsystemd"), plain: "twice"),
        Secret(
            name: "REDIS_SENTINEL_PASSWORD", value: { $0.redisSentinelPassword }, file: ("from-file\n", "from-file"),
            credential: ("fromsystemd\r\n", "fromsystemd"), plain: "plain"),
        Secret(
            name: "APNS_PROXY_AUTHORIZATION", value: { $0.apnsProxyAuthorization },
            file: ("relay:from-file\n", "relay:from-file"), credential: ("relay:systemd\r\n", "relay:systemd"),
            plain: "relay:plain"),
    ]

    /// The environment every relay needs, without the optional secrets.
    static func requiredEnvironment() -> [String: String] {
        let relayKey = Base64.urlEncode(SecureRandom.bytes(count: 32))
        return [
            "APNS_KEY_SANDBOX": P256.Signing.PrivateKey().pemRepresentation, "APNS_KEY_ID_SANDBOX": "ABCDE12345",
            "APNS_TEAM_ID": "TEAM123456", "RELAY_KEYS": #"{"1":"\#(relayKey)"}"#,
        ]
    }

    /// The secrets `env` gives, with `files` as the only readable files.
    static func load(_ env: [String: String], files: [String: String]) throws(ConfigurationError) -> RelaySecrets {
        try RelaySecrets.load(
            from: SecretSource(environment: env) { path in
                guard let text = files[path] else { throw ConfigurationError(.unreadable, path, "none") }
                return text
            })
    }

    /// The secrets of a relay given one secret (`name`) through systemd's credentials directory.
    static func loadCredential(_ name: String, _ text: String) throws(ConfigurationError) -> RelaySecrets {
        var env = requiredEnvironment()
        env["CREDENTIALS_DIRECTORY"] = "/creds"
        return try load(env, files: ["/creds/\(name)": text])
    }

    @Test(arguments: secrets)
    func aSecretIsReadInEveryForm(secret: Secret) throws {
        var env = Self.requiredEnvironment()
        let files = ["/run/secrets/\(secret.name)": secret.file.text, "/creds/\(secret.name)": secret.credential.text]
        func load() throws(ConfigurationError) -> RelaySecrets { try Self.load(env, files: files) }
        #expect(try secret.value(load()) == nil)
        env[secret.name] = secret.plain
        #expect(try secret.value(load()) == secret.plain)
        env[secret.name + "_FILE"] = "/run/secrets/\(secret.name)"
        #expect(throws: ConfigurationError(.invalid, secret.name, "")) { try load() }
        env[secret.name] = nil
        #expect(try secret.value(load()) == secret.file.value)
        env[secret.name + "_FILE"] = nil
        env["CREDENTIALS_DIRECTORY"] = "/creds"
        #expect(try secret.value(load()) == secret.credential.value)
    }
}
