import JSON
import RelayCrypto

/// The secrets (docs/DESIGN.md, "Configuration"): APNs keys per environment, the team, relay keys.
public struct RelaySecrets: Sendable {
    /// One environment's APNs signing identity: a key given as PEM text, or named in a PKCS#11 token by a URI
    /// (docs/DESIGN.md, "APNs keys in a PKCS#11 token"), whose signer exists once the token is opened
    /// (``RelaySetup``).
    public struct APNsKey: Sendable {
        public let keyID: String
        /// What signs this environment's provider tokens; nil for a token's key not yet opened.
        public var signer: (any ProviderTokenSigner)?
        /// Where the key is held when it is in a token; nil for a key given as PEM text.
        public let uri: PKCS11URI?

        public init(keyID: String, key: P256.Signing.PrivateKey) {
            self.keyID = keyID
            signer = key
            uri = nil
        }

        /// A key in a token, to be opened.
        public init(keyID: String, uri: PKCS11URI) {
            self.keyID = keyID
            signer = nil
            self.uri = uri
        }
    }

    public var teamID: String
    public var apnsKeys: [APNsEnvironment: APNsKey]
    public var relayKeys: RelayKeys
    /// AUTH's password for the Redis limits store (`REDIS_PASSWORD`); nil: no AUTH.
    public var redisPassword: String? = nil
    /// `user:password` for the APNs proxy's `Proxy-Authorization: Basic` (`APNS_PROXY_AUTHORIZATION`); nil: none.
    public var apnsProxyAuthorization: String? = nil
    /// AUTH's password for the sentinels of `limits_store.sentinel` (`REDIS_SENTINEL_PASSWORD`); nil: no AUTH.
    public var redisSentinelPassword: String? = nil
    /// The user PIN of the PKCS#11 token that holds APNs keys (`APNS_PKCS11_PIN`); nil: none given.
    public var pkcs11PIN: String? = nil

    public init(teamID: String, apnsKeys: [APNsEnvironment: APNsKey], relayKeys: RelayKeys) {
        self.teamID = teamID
        self.apnsKeys = apnsKeys
        self.relayKeys = relayKeys
    }

    /// The environments that can deliver (have a key), in a stable order.
    public var environments: [APNsEnvironment] { APNsEnvironment.allCases.filter { apnsKeys[$0] != nil } }

    public func credentials(_ environment: APNsEnvironment) -> ProviderCredentials? {
        apnsKeys[environment].flatMap { key in
            key.signer.map { ProviderCredentials(keyID: key.keyID, teamID: teamID, signer: $0) }
        }
    }

    /// Loads and checks every secret; the first problem is thrown. Errors name the variable, never its value.
    public static func load(from source: SecretSource, keygen: String = "duo-relay keygen") throws(ConfigurationError)
        -> RelaySecrets
    {
        let checked = check(from: source, keygen: keygen)
        if let first = checked.problems.first { throw first }
        return checked.secrets!
    }

    /// What ``check(from:)`` found: the secrets when every one is right, the environments whose key loaded, and
    /// every problem (one per variable).
    public struct Check: Sendable {
        public let secrets: RelaySecrets?
        public let environments: [APNsEnvironment]
        public let problems: [ConfigurationError]
    }

    /// Loads and checks every secret, finding every problem rather than stopping at the first (`check`).
    /// - Parameter keygen: the command that makes a relay key, as the hint names it (the running binary's).
    public static func check(from source: SecretSource, keygen: String = "duo-relay keygen") -> Check {
        let problems = ConfigurationProblems.Collector()
        var relayKeys: RelayKeys?
        problems.attempt { () throws(ConfigurationError) in
            guard let relayKeysText = try source.value("RELAY_KEYS") else {
                throw ConfigurationError(
                    .missing, "RELAY_KEYS", source.notSet("RELAY_KEYS") + ": run `\(keygen)` to make a key")
            }
            relayKeys = try parseRelayKeys(relayKeysText, keygen: keygen)
        }

        var apnsKeys: [APNsEnvironment: APNsKey] = [:]
        var environmentProblems = false
        for environment in APNsEnvironment.allCases {
            let before = problems.problems.count
            problems.attempt { () throws(ConfigurationError) in
                apnsKeys[environment] = try apnsKey(environment, from: source, problems: problems)
            }
            environmentProblems = environmentProblems || problems.problems.count > before
        }
        if apnsKeys.isEmpty && !environmentProblems {
            problems.add(
                ConfigurationError(
                    .missing, "APNS_KEY_SANDBOX",
                    "no APNs environment is configured: set APNS_KEY_SANDBOX and "
                        + "APNS_KEY_ID_SANDBOX, or APNS_KEY_PRODUCTION and APNS_KEY_ID_PRODUCTION"))
        }
        var teamID: String?
        problems.attempt { () throws(ConfigurationError) in
            guard let value = try source.value("APNS_TEAM_ID") else {
                throw ConfigurationError(.missing, "APNS_TEAM_ID", source.notSet("APNS_TEAM_ID"))
            }
            guard isAppleIdentifier(value) else {
                throw ConfigurationError(.invalid, "APNS_TEAM_ID", "must be 10 characters of A-Z and 0-9")
            }
            teamID = value
        }
        var redisPassword: String?
        problems.attempt { () throws(ConfigurationError) in redisPassword = try source.value("REDIS_PASSWORD") }
        var apnsProxyAuthorization: String?
        problems.attempt { () throws(ConfigurationError) in
            apnsProxyAuthorization = try proxyAuthorization(from: source)
        }
        var redisSentinelPassword: String?
        problems.attempt { () throws(ConfigurationError) in
            redisSentinelPassword = try source.value("REDIS_SENTINEL_PASSWORD")
        }
        var pkcs11PIN: String?
        problems.attempt { () throws(ConfigurationError) in pkcs11PIN = try source.value("APNS_PKCS11_PIN") }
        let environments = APNsEnvironment.allCases.filter { apnsKeys[$0] != nil }
        guard problems.problems.isEmpty, let relayKeys, let teamID else {
            return Check(secrets: nil, environments: environments, problems: problems.problems)
        }
        var secrets = RelaySecrets(teamID: teamID, apnsKeys: apnsKeys, relayKeys: relayKeys)
        secrets.redisPassword = redisPassword
        secrets.apnsProxyAuthorization = apnsProxyAuthorization
        secrets.redisSentinelPassword = redisSentinelPassword
        secrets.pkcs11PIN = pkcs11PIN
        return Check(secrets: secrets, environments: environments, problems: [])
    }

    /// One environment's key and key id, nil when neither is given. The key id's problem is added to `problems`
    /// when the key has one of its own too, so that both are reported.
    private static func apnsKey(
        _ environment: APNsEnvironment, from source: SecretSource, problems: ConfigurationProblems.Collector
    ) throws(ConfigurationError) -> APNsKey? {
        let keyName = "APNS_KEY_" + environment.variableSuffix
        let idName = "APNS_KEY_ID_" + environment.variableSuffix
        var pem: String?
        var keyProblem: ConfigurationError?
        do {
            pem = try source.value(keyName)
        } catch {
            keyProblem = error
        }
        let id = try source.value(idName)
        if let keyProblem {
            if let id, !isAppleIdentifier(id) {
                problems.add(ConfigurationError(.invalid, idName, "must be 10 characters of A-Z and 0-9"))
            }
            throw keyProblem
        }
        switch (pem, id) {
        case (nil, nil):
            return nil
        case (.some, nil):
            throw ConfigurationError(
                .missing, idName, source.notSet(idName) + ", but \(keyName) is: give both or neither")
        case (nil, .some):
            throw ConfigurationError(
                .missing, keyName, source.notSet(keyName) + ", but \(idName) is: give both or neither")
        case (.some(let text), .some(let id)) where PKCS11URI.isURI(text):
            let uri = try PKCS11URI(parsing: text, subject: keyName)
            guard isAppleIdentifier(id) else {
                throw ConfigurationError(.invalid, idName, "must be 10 characters of A-Z and 0-9")
            }
            return APNsKey(keyID: id, uri: uri)
        case (.some(let pem), .some(let id)):
            let idIsValid = isAppleIdentifier(id)
            let key = try? P256.Signing.PrivateKey(pemRepresentation: pem)
            if !idIsValid && key == nil {
                problems.add(ConfigurationError(.invalid, idName, "must be 10 characters of A-Z and 0-9"))
            }
            guard let key else { throw ConfigurationError(.invalid, keyName, Self.keyForm) }
            guard idIsValid else {
                throw ConfigurationError(.invalid, idName, "must be 10 characters of A-Z and 0-9")
            }
            return APNsKey(keyID: id, key: key)
        }
    }

    /// `APNS_PROXY_AUTHORIZATION`: `user:password`, printable ASCII (it goes into an HTTP header), or absent.
    private static func proxyAuthorization(from source: SecretSource) throws(ConfigurationError) -> String? {
        guard let value = try source.value("APNS_PROXY_AUTHORIZATION") else { return nil }
        guard value.contains(":"), value.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw ConfigurationError(
                .invalid, "APNS_PROXY_AUTHORIZATION", "must be user:password in printable ASCII (not shown)")
        }
        return value
    }

    /// What an APNs key must be, said when it is not.
    static let keyForm =
        "is not an APNs key: a P-256 private key in PEM, the .p8 file as Apple gives it (PKCS#8, "
        + "\"BEGIN PRIVATE KEY\") or the same key as SEC1 (\"BEGIN EC PRIVATE KEY\"), unencrypted, or a PKCS#11 URI "
        + "(pkcs11:token=...;object=...) naming the key in a token"

    /// `{"<id 0..255>": "<base64url 32-byte key>", ...}`
    public static func parseRelayKeys(_ text: String, keygen: String = "duo-relay keygen") throws(ConfigurationError)
        -> RelayKeys
    {
        let document: JSONValue
        do {
            document = try JSONParser.parse(Array(text.utf8))
        } catch {
            // Only a well-formed key id is named: a name that is not one may be a key put in the id's place.
            throw ConfigurationError(error, subject: "RELAY_KEYS", shows: { isKeyID($0) })
        }
        guard case .object(let entries) = document else {
            throw ConfigurationError(.invalid, "RELAY_KEYS", "must be a JSON object of key id to base64url key")
        }
        guard !entries.isEmpty else {
            throw ConfigurationError(.invalid, "RELAY_KEYS", "holds no key: run `\(keygen)` to make one")
        }
        var keys: [UInt8: SymmetricKey] = [:]
        for (name, value) in entries.sorted(by: { $0.key < $1.key }) {
            guard isKeyID(name), let id = UInt8(name) else {
                // Not repeated, not even in part: ids and keys swapped would put a key here.
                throw ConfigurationError(
                    .invalid, "RELAY_KEYS", "a key id is not a number from 0 to 255 (\"0\" to \"255\"; not shown)")
            }
            guard case .string(let encoded) = value, let bytes = Base64.urlDecode(encoded), bytes.count == 32,
                let key = try? SymmetricKey(bytes: bytes)
            else {
                throw ConfigurationError(.invalid, "RELAY_KEYS", "key \(id) is not a base64url 32-byte key")
            }
            keys[id] = key
        }
        return RelayKeys(keys)
    }

    static func isAppleIdentifier(_ text: String) -> Bool {
        text.utf8.count == 10
            && text.utf8.allSatisfy {
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
            }
    }

    /// A relay key id as `RELAY_KEYS` names it: "0" to "255", without leading zeros.
    static func isKeyID(_ name: String) -> Bool {
        UInt8(name).map { String($0) == name } ?? false
    }
}
