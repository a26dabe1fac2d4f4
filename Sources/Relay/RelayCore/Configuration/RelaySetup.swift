import RelayCrypto

/// Opens a key held in a PKCS#11 token: the module's path, the key's URI, the user PIN. The I/O is the caller's
/// (the relay's PKCS#11 client); a failure is said in words that never hold the PIN.
public typealias TokenKeyOpener =
    @Sendable (_ module: String, _ uri: PKCS11URI, _ pin: String) -> Result<
        any ProviderTokenSigner, TokenKeyFailure
    >

/// Why a key in a token cannot be used: the token's words (no token, a wrong PIN, no key, several keys, not P-256).
public struct TokenKeyFailure: Error, Sendable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
}

/// A configuration with its secrets, checked together: what `check` validates and `serve` runs.
public struct RelaySetup: Sendable {
    public let configuration: RelayConfiguration
    public let secrets: RelaySecrets

    /// Checks what neither part can check alone: the grant key exists, and every configured
    /// environment's key can sign a provider token. The first problem is thrown.
    public init(configuration: RelayConfiguration, secrets: RelaySecrets) throws(ConfigurationError) {
        if let first = Self.problems(configuration: configuration, secrets: secrets).first { throw first }
        self.configuration = configuration
        self.secrets = secrets
    }

    /// Every problem of the two together (``init(configuration:secrets:)`` throws the first).
    public static func problems(configuration: RelayConfiguration, secrets: RelaySecrets) -> [ConfigurationError] {
        var problems: [ConfigurationError] = []
        if secrets.relayKeys[configuration.grantKeyID] == nil {
            problems.append(
                ConfigurationError(
                    .invalid, "grant_key_id",
                    "is \(configuration.grantKeyID), which RELAY_KEYS does not hold (it holds "
                        + secrets.relayKeys.ids.map(String.init).joined(separator: ", ") + ")"))
        }
        // Each key signs one provider token, which its public half must verify (a token's key found with the public
        // key of another would sign tokens APNs refuses). A token's key not opened was reported where it was opened.
        for environment in secrets.environments {
            guard let credentials = secrets.credentials(environment) else { continue }
            let location = secrets.apnsKeys[environment]?.uri.map { " (\($0))" } ?? ""
            guard let token = try? credentials.sign(issuedAt: 0) else {
                problems.append(
                    ConfigurationError(
                        .invalid, "APNS_KEY_" + environment.variableSuffix,
                        "\(environment.name): the key\(location) cannot sign a provider token"))
                continue
            }
            guard JWT.verifyES256(token, using: credentials.signer.publicKey) else {
                problems.append(
                    ConfigurationError(
                        .invalid, "APNS_KEY_" + environment.variableSuffix,
                        "\(environment.name): the key\(location) signs provider tokens its public key does not "
                            + "verify (the token's public key object with the same id is another key's)"))
                continue
            }
        }
        let store = configuration.limitsStore
        if store.kind == .redis, store.username != nil, secrets.redisPassword == nil {
            problems.append(
                ConfigurationError(
                    .missing, "REDIS_PASSWORD", "is not set, but limits_store.username is: AUTH needs both"))
        }
        return problems
    }

    /// A configuration file's bytes and the secrets, checked with every problem found (`check`): the setup when
    /// there is none; otherwise the problems, with the configuration as far as it could be read and the
    /// environments whose keys loaded, for the checks that need only those.
    /// - Parameter tokens: opens the keys given as PKCS#11 URIs (the I/O shell's; nil: none can be opened).
    public static func check(
        configuration bytes: [UInt8], secrets source: SecretSource, keygen: String = "duo-relay keygen",
        tokens: TokenKeyOpener? = nil
    ) -> Check {
        let (configuration, configurationProblems) = RelayConfiguration.check(bytes)
        let secrets = RelaySecrets.check(from: source, keygen: keygen)
        var problems = configurationProblems + secrets.problems
        if configurationProblems.isEmpty, var loaded = secrets.secrets {
            problems += openTokenKeys(in: &loaded, configuration: configuration, tokens: tokens)
            problems += Self.problems(configuration: configuration, secrets: loaded)
            if problems.isEmpty {
                return Check(
                    setup: RelaySetup(checked: configuration, secrets: loaded), configuration: configuration,
                    environments: loaded.environments, problems: [])
            }
        }
        return Check(
            setup: nil, configuration: configuration, environments: secrets.environments, problems: problems)
    }

    /// What ``check(configuration:secrets:)`` found.
    public struct Check: Sendable {
        public let setup: RelaySetup?
        /// The configuration as far as it could be read (nil: the file could not be); keys at fault keep defaults.
        public let configuration: RelayConfiguration?
        public let environments: [APNsEnvironment]
        public let problems: [ConfigurationError]

        public init(
            setup: RelaySetup?, configuration: RelayConfiguration?, environments: [APNsEnvironment],
            problems: [ConfigurationError]
        ) {
            self.setup = setup
            self.configuration = configuration
            self.environments = environments
            self.problems = problems
        }
    }

    /// Opens every key given as a PKCS#11 URI with `tokens`, giving its environment a signer: the module is
    /// `apns.pkcs11_module`, the PIN `APNS_PKCS11_PIN`. Every problem names the environment and the URI, never the
    /// PIN.
    static func openTokenKeys(
        in secrets: inout RelaySecrets, configuration: RelayConfiguration, tokens: TokenKeyOpener?
    ) -> [ConfigurationError] {
        let inTokens = secrets.environments.filter {
            secrets.apnsKeys[$0]?.uri != nil && secrets.apnsKeys[$0]?.signer == nil
        }
        guard let first = inTokens.first else { return [] }
        let variable = "APNS_KEY_" + first.variableSuffix
        var problems: [ConfigurationError] = []
        if configuration.apns.pkcs11Module == nil {
            problems.append(
                ConfigurationError(
                    .missing, "apns.pkcs11_module",
                    "is not set, but \(variable) names a key in a PKCS#11 token: set it to the token's library"))
        }
        if secrets.pkcs11PIN == nil {
            problems.append(
                ConfigurationError(
                    .missing, "APNS_PKCS11_PIN",
                    "is not set, but \(variable) names a key in a PKCS#11 token: give the token's user PIN"))
        }
        guard let module = configuration.apns.pkcs11Module, let pin = secrets.pkcs11PIN else { return problems }
        for environment in inTokens {
            guard let uri = secrets.apnsKeys[environment]?.uri else { continue }
            let subject = "APNS_KEY_" + environment.variableSuffix
            guard let tokens else {
                problems.append(
                    ConfigurationError(
                        .invalid, subject, "\(environment.name): keys in PKCS#11 tokens cannot be opened here"))
                continue
            }
            switch tokens(module, uri, pin) {
            case .success(let signer):
                secrets.apnsKeys[environment]?.signer = signer
            case .failure(let failure):
                problems.append(
                    ConfigurationError(
                        .invalid, subject, "\(environment.name): the key \(uri) cannot be used: \(failure.reason)"))
            }
        }
        return problems
    }

    private init(checked configuration: RelayConfiguration, secrets: RelaySecrets) {
        self.configuration = configuration
        self.secrets = secrets
    }

    /// A summary for operators: nothing secret.
    public var summary: [String] {
        let config = configuration
        return [
            "listen: \(config.listen)",
            "metrics: " + (config.metricsListen.map { "\($0) (metrics_listen)" } ?? "none (metrics_listen not set)"),
            "topic: \(config.apns.topic)",
            "environments: "
                + secrets.environments.map { environment in
                    let key = secrets.apnsKeys[environment]!
                    return "\(environment) (key id \(key.keyID)" + (key.uri.map { ", in the token at \($0)" } ?? "")
                        + ")"
                }.joined(separator: ", "),
            "apns origins: "
                + secrets.environments.map { "\($0) \(config.apns.origin($0))" }.joined(separator: ", ")
                + "; trusted CAs: the system's"
                + (config.apns.caFile.map { " and apns.ca_file " + $0 } ?? " (no apns.ca_file)"),
            "team: \(secrets.teamID)",
            "relay keys: " + secrets.relayKeys.ids.map(String.init).joined(separator: ", ")
                + "; grants sealed with key \(config.grantKeyID)",
            "grant lifetime: \(config.grantLifetimeSeconds) s",
            "largest notification: \(Notification.largestPayloadSize(placeholder: config.apns.placeholder)) of "
                + "\(Notification.maximumPayloadSize) bytes",
            "push limit: \(config.pushLimit.requests) per \(config.pushLimit.period / 1_000_000_000) s per phone",
            "address limit: \(config.ipLimit.requests) per \(config.ipLimit.period / 1_000_000_000) s, then blocked "
                + "\(config.ipLimit.block / 1_000_000_000) s"
                + (config.clientIPHeader.map { "; client address from header \($0)" } ?? ""),
            "limits store: " + limitsStoreSummary,
        ] + proxySummary
    }

    /// The egress proxy's line when there is one: its URL and whether credentials are sent, never them.
    private var proxySummary: [String] {
        guard let proxy = configuration.apns.proxy else { return [] }
        return [
            "apns proxy: \(proxy) (CONNECT; Proxy-Authorization: "
                + (secrets.apnsProxyAuthorization == nil ? "none" : "Basic, from APNS_PROXY_AUTHORIZATION") + ")"
        ]
    }

    /// One line when `HTTPS_PROXY` or `https_proxy` is set in `environment` but `apns.proxy` is not: the relay uses
    /// no proxy it is not configured with (docs/DESIGN.md, "Egress proxy"), and an operator who set one expects it used.
    public static func unusedProxyVariableNote(
        _ configuration: RelayConfiguration, environment: [String: String]
    ) -> String? {
        guard configuration.apns.proxy == nil else { return nil }
        let set = ["HTTPS_PROXY", "https_proxy"].filter { !(environment[$0] ?? "").isEmpty }
        guard !set.isEmpty else { return nil }
        return set.joined(separator: " and ") + " set in the environment but not used: APNs is reached directly "
            + "unless apns.proxy is set"
    }

    /// The store's line: where it is and how it fails, never the password.
    private var limitsStoreSummary: String {
        let store = configuration.limitsStore
        if store.kind == .redis, let sentinel = store.sentinel {
            return "redis through \(sentinel) (\(sentinel.tls ? "TLS" : "no TLS"); sentinel AUTH "
                + (secrets.redisSentinelPassword == nil ? "none" : "with password") + "; AUTH "
                + (secrets.redisPassword == nil ? "none" : store.username.map { "as user \($0)" } ?? "with password")
                + "), key prefix \(store.keyPrefix), timeout \(store.timeoutMilliseconds) ms, on failure "
                + store.onFailure.rawValue
        }
        guard store.kind == .redis, let url = store.url else { return "memory (this instance only)" }
        return "redis \(url) (\(url.tls ? "TLS" : "no TLS"); AUTH "
            + (secrets.redisPassword == nil ? "none" : store.username.map { "as user \($0)" } ?? "with password")
            + "), key prefix \(store.keyPrefix), timeout \(store.timeoutMilliseconds) ms, on failure "
            + store.onFailure.rawValue
    }
}
