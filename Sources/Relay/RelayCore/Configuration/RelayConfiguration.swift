import JSON

/// The relay's configuration file (docs/DESIGN.md, "Configuration"). Secrets never live here.
public struct RelayConfiguration: Equatable, Sendable {
    public var listen = ListenAddress(host: "127.0.0.1", port: 8787)
    public var grantLifetimeSeconds: UInt64 = 2_592_000
    public var grantKeyID: UInt8 = 1
    public var pushLimit = LimitPolicy(requests: 20, periodSeconds: 60)
    public var ipLimit = LimitPolicy(requests: 10, periodSeconds: 10, blockSeconds: 10)
    /// Set only when a trusted proxy in front of the relay supplies the client address.
    public var clientIPHeader: String? = nil
    public var apns = APNs(topic: "")
    public var server = Server()
    /// Where `GET /metrics` is served; nil: nowhere.
    public var metricsListen: ListenAddress? = nil
    /// Where the limits are counted: in memory, or shared through Redis.
    public var limitsStore = LimitsStore()
    /// How log lines are written (`log.format`): text for people, JSON for log pipelines.
    public var logFormat = LogLine.Format.text
    /// The certificate and key the relay serves HTTPS with (docs/DESIGN.md, "TLS"); nil: plain HTTP for a front.
    public var tls: TLSFiles? = nil

    /// `tls`: where the pair is read from (at start, on SIGHUP and by `check`). Paths, not secrets: certificate tools
    /// write files.
    public struct TLSFiles: Equatable, Sendable {
        /// PEM: the leaf first, then its chain (certbot's `fullchain.pem`, cert-manager's `tls.crt`).
        public var certificateFile: String
        /// An unencrypted PEM private key matching the leaf.
        public var keyFile: String

        public init(certificateFile: String, keyFile: String) {
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }

    public struct APNs: Equatable, Sendable {
        public var topic: String
        public var placeholder = "PUSH"
        public var expirationSeconds: UInt64 = 86_400
        public var sandboxOrigin = "https://api.sandbox.push.apple.com"
        public var productionOrigin = "https://api.push.apple.com"
        public var caFile: String? = nil
        public var timeoutMilliseconds = 10_000
        /// HTTP/2 connections per environment.
        public var maxConnections = 2
        /// The HTTP proxy every APNs connection goes through (`CONNECT`), or nil: direct.
        public var proxy: ProxyURL? = nil
        /// The PKCS#11 library that holds the APNs keys given as `pkcs11:` URIs, or nil (keys are PEM text).
        public var pkcs11Module: String? = nil
        public init(topic: String) { self.topic = topic }

        public func origin(_ environment: APNsEnvironment) -> String {
            environment == .sandbox ? sandboxOrigin : productionOrigin
        }

        public var notificationSettings: NotificationSettings {
            NotificationSettings(topic: topic, placeholder: placeholder, expirationSeconds: expirationSeconds)
        }
    }

    /// Protection of the relay itself (issue: abuse and faults).
    public struct Server: Equatable, Sendable {
        public var maxConnections = 16_384
        public var maxConnectionsPerAddress = 256
        public var connectionTimeoutSeconds = 30
        /// Pushes waiting for or at APNs at once; beyond: 503 `overloaded`.
        public var maxPushesInFlight = 8_192
        /// How long a stopping relay lets pushes finish.
        public var shutdownGraceSeconds = 10
        /// Workers, each one event loop (docs/DESIGN.md, "Worker model"); by default one per core this process may use.
        public var threads = Server.defaultThreads
        /// Keys each limiter remembers at most (about 150 bytes each); the least recently used go first.
        public var maxTrackedKeys = 200_000
        public init() {}
    }

    public init() {}

    public init(topic: String) {
        apns = APNs(topic: topic)
    }

    /// Parses and checks a configuration file's bytes; the first problem found is thrown.
    public static func parse(_ bytes: [UInt8]) throws(ConfigurationError) -> RelayConfiguration {
        let checked = check(bytes)
        if let first = checked.problems.first { throw first }
        return checked.configuration
    }

    /// Parses and checks a configuration file's bytes, finding every problem (one per key) rather than stopping
    /// at the first: what `check` reports. The configuration is what could be read, each key at fault left at
    /// its default, so that what depends only on the keys that are right can still be checked.
    public static func check(_ bytes: [UInt8]) -> (configuration: RelayConfiguration, problems: [ConfigurationError]) {
        var config = RelayConfiguration()
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes)
        } catch {
            return (config, [ConfigurationError(error, subject: "config", shows: isKeyName)])
        }
        let problems = ConfigurationProblems.Collector()
        let root: Reader
        do {
            root = try Reader(document, path: "")
        } catch {
            return (config, [error])
        }
        problems.add(
            root.unknownKeys([
                "listen", "grant_lifetime_s", "grant_key_id", "push_limit", "ip_limit", "apns", "server",
                "metrics_listen", "limits_store", "log", "tls",
            ]))
        var listenRead = true
        problems.attempt { () throws(ConfigurationError) in
            do throws(ConfigurationError) {
                if let text = try root.string("listen") {
                    config.listen = text == "systemd" ? .systemd : try address(text, key: "listen")
                }
            } catch {
                listenRead = false
                throw error
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let text = try root.optionalString("metrics_listen") {
                config.metricsListen = try address(text, key: "metrics_listen")
            }
            if listenRead, let metrics = config.metricsListen, metrics.port != 0, metrics.port == config.listen.port,
                metrics.host == config.listen.host || [metrics.host, config.listen.host].contains(where: isWildcard)
            {
                throw ConfigurationError(
                    .invalid, "metrics_listen", "must not be the listen address (the metrics need a port of their own)")
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let value = try root.integer("grant_lifetime_s", in: 1...Int64(UInt32.max)) {
                config.grantLifetimeSeconds = UInt64(value)
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let value = try root.integer("grant_key_id", in: 0...255) { config.grantKeyID = UInt8(value) }
        }

        // Each setting left out keeps the default its property declares.
        problems.attempt { () throws(ConfigurationError) in
            if let push = try root.object("push_limit") {
                problems.add(push.unknownKeys(["requests", "period_s"]))
                config.pushLimit.read(push, blocks: false, into: problems)
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let ip = try root.object("ip_limit") {
                problems.add(ip.unknownKeys(["requests", "period_s", "block_s", "client_ip_header"]))
                config.ipLimit.read(ip, blocks: true, into: problems)
                problems.attempt { () throws(ConfigurationError) in
                    if let header = try ip.optionalString("client_ip_header") {
                        guard !header.isEmpty, header.utf8.allSatisfy(isTokenCharacter) else {
                            throw ConfigurationError(
                                .invalid, ip.key("client_ip_header"), "must be an HTTP header name")
                        }
                        config.clientIPHeader = header
                    }
                }
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            guard let apns = try root.object("apns") else {
                throw ConfigurationError(.missing, "apns.topic", "is required")
            }
            config.apns.read(apns, into: problems)
        }

        problems.attempt { () throws(ConfigurationError) in
            guard let server = try root.object("server") else { return }
            problems.add(
                server.unknownKeys([
                    "max_connections", "max_connections_per_address", "connection_timeout_s", "max_pushes_in_flight",
                    "shutdown_grace_s", "threads", "max_tracked_keys",
                ]))
            let settings: [(String, ClosedRange<Int64>, WritableKeyPath<Server, Int>)] = [
                ("max_connections", 1...1_000_000, \.maxConnections),
                ("max_connections_per_address", 0...1_000_000, \.maxConnectionsPerAddress),
                ("connection_timeout_s", 1...3_600, \.connectionTimeoutSeconds),
                ("max_pushes_in_flight", 1...1_000_000, \.maxPushesInFlight),
                ("shutdown_grace_s", 0...600, \.shutdownGraceSeconds),
                ("threads", 1...64, \.threads),
                ("max_tracked_keys", 1_000...100_000_000, \.maxTrackedKeys),
            ]
            for (name, range, property) in settings {
                problems.attempt { () throws(ConfigurationError) in
                    if let value = try server.integer(name, in: range) { config.server[keyPath: property] = Int(value) }
                }
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            guard root.fields["tls"] != nil, root.fields["tls"] != .null, let tls = try root.object("tls") else {
                return
            }
            problems.add(tls.unknownKeys(["certificate_file", "key_file"]))
            var files = TLSFiles(certificateFile: "", keyFile: "")
            for (name, property) in [("certificate_file", \TLSFiles.certificateFile), ("key_file", \TLSFiles.keyFile)] {
                problems.attempt { () throws(ConfigurationError) in
                    guard let path = try tls.string(name) else {
                        throw ConfigurationError(.missing, tls.key(name), "is required with tls")
                    }
                    guard !path.isEmpty else {
                        throw ConfigurationError(.invalid, tls.key(name), "must be a file path")
                    }
                    files[keyPath: property] = path
                }
            }
            if !files.certificateFile.isEmpty && !files.keyFile.isEmpty { config.tls = files }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let store = try root.object("limits_store") {
                config.limitsStore = LimitsStore.parse(store, into: problems)
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            guard let log = try root.object("log") else { return }
            problems.add(log.unknownKeys(["format"]))
            if let text = try log.string("format") {
                guard let format = LogLine.Format(rawValue: text) else {
                    throw ConfigurationError(.invalid, log.key("format"), "must be \"text\" or \"json\"")
                }
                config.logFormat = format
            }
        }
        return (config, problems.problems)
    }

    private static func address(_ text: String, key: String) throws(ConfigurationError) -> ListenAddress {
        guard let address = ListenAddress(text) else {
            let forms = key == "listen" ? "host:port or [ipv6]:port, or systemd" : "host:port or [ipv6]:port"
            throw ConfigurationError(.invalid, key, "must be " + forms)
        }
        guard ListenAddress.isIPAddress(address.host) else {
            throw ConfigurationError(
                .invalid, key, "must name its host by IP address (127.0.0.1, 0.0.0.0, [::1], [::]), not by name")
        }
        return address
    }

    /// An address that listens on every interface: it takes its port on all of them.
    private static func isWildcard(_ host: String) -> Bool {
        host == "0.0.0.0" || host.split(separator: ":").allSatisfy { $0.allSatisfy { $0 == "0" } }
    }

    fileprivate static func origin(_ text: String, key: String) throws(ConfigurationError) -> String {
        guard text.hasPrefix("https://"), text.count > 8, !text.dropFirst(8).contains(where: { "/?#@\\".contains($0) }),
            text.utf8.allSatisfy({ $0 > 32 && $0 < 127 })
        else {
            throw ConfigurationError(.invalid, key, "must be an https:// origin without a path")
        }
        // host[:port] or [ipv6][:port], as the APNs client reads it: an empty port (an unset variable in a
        // template) is this key's fault, not found later as a client that cannot be set up.
        let parts = try HostPort(text.dropFirst(8), key: key, form: "must be https://host[:port]")
        guard !parts.host.isEmpty else { throw ConfigurationError(.invalid, key, "has no host") }
        if let port = parts.portText {
            guard let value = HostPort.port(port), value > 0 else {
                throw ConfigurationError(.invalid, key, "has a port that is not 1 to 65535 (https://host[:port])")
            }
        }
        return text
    }

    /// Whether a key from the file may be shown in an error (escaped, see ``ConfigurationError``): a typo of a
    /// configuration key looks like one, short snake_case (`grant_lifetme_s`). Anything else is not repeated: it
    /// may be a secret pasted in the wrong place (a relay key, an APNs key, a Redis password), and those are
    /// almost never lowercase letters, digits and `_` alone.
    static func isKeyName(_ name: String) -> Bool {
        name.utf8.count <= 32
            && name.utf8.allSatisfy {
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || $0 == UInt8(ascii: "_")
            }
    }

    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    static func isPlaceholderCharacter(_ byte: UInt8) -> Bool {
        isTokenCharacter(byte) || byte == UInt8(ascii: ".")
    }

    static func isTopicCharacter(_ byte: UInt8) -> Bool {
        isPlaceholderCharacter(byte)
    }
}

extension LimitPolicy {
    /// Takes the settings given in `object` (`requests`, `period_s` and, if `blocks`, `block_s`); those left out
    /// keep their values. Each problem is added to `problems`.
    fileprivate mutating func read(
        _ object: Reader, blocks: Bool, into problems: ConfigurationProblems.Collector
    ) {
        problems.attempt { () throws(ConfigurationError) in
            if let value = try object.integer("requests", in: 1...1_000_000) { requests = Int(value) }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let value = try object.integer("period_s", in: 1...86_400) { period = UInt64(value) * 1_000_000_000 }
        }
        guard blocks else { return }
        problems.attempt { () throws(ConfigurationError) in
            if let value = try object.integer("block_s", in: 0...86_400) { block = UInt64(value) * 1_000_000_000 }
        }
    }
}

extension RelayConfiguration.APNs {
    /// Takes the `apns` block's settings; each problem is added to `problems`.
    fileprivate mutating func read(_ apns: Reader, into problems: ConfigurationProblems.Collector) {
        problems.add(
            apns.unknownKeys([
                "topic", "placeholder", "expiration_s", "sandbox_origin", "production_origin", "ca_file", "timeout_ms",
                "max_connections", "proxy", "pkcs11_module",
            ]))
        problems.attempt { () throws(ConfigurationError) in
            guard let topic = try apns.string("topic") else {
                throw ConfigurationError(.missing, "apns.topic", "is required")
            }
            guard !topic.isEmpty, topic.utf8.count <= 255, topic.utf8.allSatisfy(RelayConfiguration.isTopicCharacter)
            else {
                throw ConfigurationError(.invalid, "apns.topic", "must be a bundle id such as app.openduo.pocket")
            }
            self.topic = topic
        }
        problems.attempt { () throws(ConfigurationError) in
            guard let placeholder = try apns.string("placeholder") else { return }
            guard !placeholder.isEmpty, placeholder.utf8.allSatisfy(RelayConfiguration.isPlaceholderCharacter) else {
                throw ConfigurationError(.invalid, "apns.placeholder", "must be ASCII letters, digits, '.', '_' or '-'")
            }
            guard Notification.largestPayloadSize(placeholder: placeholder) <= Notification.maximumPayloadSize else {
                throw ConfigurationError(
                    .invalid, "apns.placeholder",
                    "is too long: the largest notification would exceed APNs' \(Notification.maximumPayloadSize) bytes")
            }
            self.placeholder = placeholder
        }
        problems.attempt { () throws(ConfigurationError) in
            if let value = try apns.integer("expiration_s", in: 0...Int64(UInt32.max)) {
                expirationSeconds = UInt64(value)
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let origin = try apns.string("sandbox_origin") {
                sandboxOrigin = try RelayConfiguration.origin(origin, key: "apns.sandbox_origin")
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let origin = try apns.string("production_origin") {
                productionOrigin = try RelayConfiguration.origin(origin, key: "apns.production_origin")
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let path = try apns.optionalString("ca_file") {
                guard !path.isEmpty else { throw ConfigurationError(.invalid, "apns.ca_file", "must be a file path") }
                caFile = path
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let value = try apns.integer("timeout_ms", in: 100...600_000) { timeoutMilliseconds = Int(value) }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let value = try apns.integer("max_connections", in: 1...64) { maxConnections = Int(value) }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let text = try apns.optionalString("proxy") { proxy = try ProxyURL.parse(text, key: apns.key("proxy")) }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let path = try apns.optionalString("pkcs11_module") {
                guard path.hasPrefix("/") else {
                    throw ConfigurationError(
                        .invalid, "apns.pkcs11_module",
                        "must be the absolute path of a PKCS#11 library (a bare name would be searched for)")
                }
                pkcs11Module = path
            }
        }
    }
}

/// Walks one JSON object of the configuration, naming keys by their dotted path in errors.
/// (Internal, not private: each block's own file reads it, as `limits_store` does.)
struct Reader {
    let fields: [String: JSONValue]
    let path: String

    init(_ value: JSONValue, path: String) throws(ConfigurationError) {
        guard case .object(let fields) = value else {
            throw ConfigurationError(.invalid, path.isEmpty ? "config" : path, "must be a JSON object")
        }
        self.fields = fields
        self.path = path
    }

    func key(_ name: String) -> String { path.isEmpty ? name : path + "." + name }

    /// One problem per key of this object that is not among `names` (those that do not look like a key, in one
    /// problem that shows none of them).
    func unknownKeys(_ names: Set<String>) -> [ConfigurationError] {
        let unknown = fields.keys.sorted().filter { !names.contains($0) }
        var problems = unknown.filter(RelayConfiguration.isKeyName).map {
            ConfigurationError(.unknownKey, key($0), "is not a known configuration key")
        }
        if unknown.contains(where: { !RelayConfiguration.isKeyName($0) }) {
            problems.append(
                ConfigurationError(
                    .unknownKey, path.isEmpty ? "config" : path,
                    "holds a key that is not a configuration key (not shown: it does not look like one)"))
        }
        return problems
    }

    func object(_ name: String) throws(ConfigurationError) -> Reader? {
        guard let value = fields[name] else { return nil }
        return try Reader(value, path: key(name))
    }

    func string(_ name: String) throws(ConfigurationError) -> String? {
        guard let value = fields[name] else { return nil }
        guard case .string(let text) = value else {
            throw ConfigurationError(.invalid, key(name), "must be a string")
        }
        return text
    }

    /// A string or null (null: the default).
    func optionalString(_ name: String) throws(ConfigurationError) -> String? {
        if fields[name] == .null { return nil }
        return try string(name)
    }

    func integer(_ name: String, in range: ClosedRange<Int64>) throws(ConfigurationError) -> Int64? {
        guard let value = fields[name] else { return nil }
        guard case .integer(let number) = value else {
            throw ConfigurationError(.invalid, key(name), "must be an integer")
        }
        guard range.contains(number) else {
            throw ConfigurationError(
                .invalid, key(name), "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return number
    }
}
