import RelayCrypto

/// The secrets (DESIGN.md, "Configuration"): APNs keys per environment, the team, relay keys.
public struct RelaySecrets: Sendable {
    /// One environment's APNs signing identity.
    public struct APNsKey: Sendable {
        public let keyID: String
        public let key: P256.Signing.PrivateKey

        public init(keyID: String, key: P256.Signing.PrivateKey) {
            self.keyID = keyID
            self.key = key
        }
    }

    public var teamID: String
    public var apnsKeys: [APNsEnvironment: APNsKey]
    public var relayKeys: RelayKeys
    /// AUTH's password for the Redis limits store (`REDIS_PASSWORD`); nil: no AUTH.
    public var redisPassword: String? = nil

    public init(teamID: String, apnsKeys: [APNsEnvironment: APNsKey], relayKeys: RelayKeys) {
        self.teamID = teamID
        self.apnsKeys = apnsKeys
        self.relayKeys = relayKeys
    }

    /// The environments that can deliver (have a key), in a stable order.
    public var environments: [APNsEnvironment] { APNsEnvironment.allCases.filter { apnsKeys[$0] != nil } }

    public func credentials(_ environment: APNsEnvironment) -> ProviderCredentials? {
        apnsKeys[environment].map { ProviderCredentials(keyID: $0.keyID, teamID: teamID, key: $0.key) }
    }

    /// Loads and checks every secret. Errors name the variable, never its value.
    public static func load(from source: SecretSource) throws(ConfigurationError) -> RelaySecrets {
        guard let relayKeysText = try source.value("RELAY_KEYS") else {
            throw ConfigurationError(.missing, "RELAY_KEYS", "is not set: run `duo-relay keygen` to make a key")
        }
        let relayKeys = try parseRelayKeys(relayKeysText)

        var apnsKeys: [APNsEnvironment: APNsKey] = [:]
        for environment in APNsEnvironment.allCases {
            let keyName = "APNS_KEY_" + environment.variableSuffix
            let idName = "APNS_KEY_ID_" + environment.variableSuffix
            let pem = try source.value(keyName)
            let id = try source.value(idName)
            switch (pem, id) {
            case (nil, nil):
                continue
            case (.some, nil):
                throw ConfigurationError(.missing, idName, "is not set, but \(keyName) is: give both or neither")
            case (nil, .some):
                throw ConfigurationError(.missing, keyName, "is not set, but \(idName) is: give both or neither")
            case (.some(let pem), .some(let id)):
                guard isAppleIdentifier(id) else {
                    throw ConfigurationError(.invalid, idName, "must be 10 characters of A-Z and 0-9")
                }
                let key: P256.Signing.PrivateKey
                do {
                    key = try P256.Signing.PrivateKey(pemRepresentation: pem)
                } catch {
                    throw ConfigurationError(
                        .invalid, keyName, "is not an APNs key (a PKCS#8 PEM P-256 private key, the .p8 file)")
                }
                apnsKeys[environment] = APNsKey(keyID: id, key: key)
            }
        }
        guard !apnsKeys.isEmpty else {
            throw ConfigurationError(
                .missing, "APNS_KEY_SANDBOX",
                "no APNs environment is configured: set APNS_KEY_SANDBOX and "
                    + "APNS_KEY_ID_SANDBOX, or APNS_KEY_PRODUCTION and APNS_KEY_ID_PRODUCTION")
        }
        guard let teamID = try source.value("APNS_TEAM_ID") else {
            throw ConfigurationError(.missing, "APNS_TEAM_ID", "is not set")
        }
        guard isAppleIdentifier(teamID) else {
            throw ConfigurationError(.invalid, "APNS_TEAM_ID", "must be 10 characters of A-Z and 0-9")
        }
        var secrets = RelaySecrets(teamID: teamID, apnsKeys: apnsKeys, relayKeys: relayKeys)
        secrets.redisPassword = try source.value("REDIS_PASSWORD")
        return secrets
    }

    /// `{"<id 0..255>": "<base64url 32-byte key>", ...}`
    public static func parseRelayKeys(_ text: String) throws(ConfigurationError) -> RelayKeys {
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
            throw ConfigurationError(.invalid, "RELAY_KEYS", "holds no key: run `duo-relay keygen` to make one")
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
