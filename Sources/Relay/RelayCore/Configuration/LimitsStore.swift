/// Where the per-phone and per-address limits are counted (docs/DESIGN.md, "Several instances"):
/// in this process's memory (the default), or in Redis, shared by every instance.
public struct LimitsStore: Equatable, Sendable {
    public enum Kind: String, Sendable {
        case memory, redis
    }

    /// What a request gets while Redis cannot answer.
    public enum OnFailure: String, Sendable {
        /// This instance's own in-memory limiter decides, with the same policies.
        case local
        /// 503 `overloaded` with `Retry-After`.
        case refuse
    }

    public var kind = Kind.memory
    /// With `kind` redis: this or ``sentinel``, exactly one.
    public var url: RedisURL? = nil
    /// With `kind` redis: the sentinels that name the primary, instead of ``url``.
    public var sentinel: RedisSentinel? = nil
    /// The ACL user for AUTH (the password comes from `REDIS_PASSWORD`).
    public var username: String? = nil
    public var timeoutMilliseconds = 100
    public var onFailure = OnFailure.local
    public var keyPrefix = "duo-relay:"
    /// A PEM CA bundle added to the roots for `rediss://` (or a sentinel block with `tls`).
    public var caFile: String? = nil

    public init() {}

    /// The configuration block `limits_store`, read through the configuration's reader; each problem is added to
    /// `problems` (the keys at fault keep their defaults).
    static func parse(_ block: Reader, into problems: ConfigurationProblems.Collector) -> LimitsStore {
        problems.add(
            block.unknownKeys([
                "kind", "url", "sentinel", "username", "timeout_ms", "on_failure", "key_prefix", "ca_file",
            ]))
        var store = LimitsStore()
        var urlRead = true
        problems.attempt { () throws(ConfigurationError) in
            if let text = try block.string("kind") {
                guard let kind = Kind(rawValue: text) else {
                    throw ConfigurationError(.invalid, block.key("kind"), "must be \"memory\" or \"redis\"")
                }
                store.kind = kind
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            do throws(ConfigurationError) {
                if let text = try block.optionalString("url") {
                    store.url = try RedisURL.parse(text, key: block.key("url"))
                }
            } catch {
                urlRead = false
                throw error
            }
        }
        var sentinelRead = true
        if let value = block.fields["sentinel"], value != .null {
            let before = problems.problems.count
            problems.attempt { () throws(ConfigurationError) in
                store.sentinel = RedisSentinel.parse(try Reader(value, path: block.key("sentinel")), into: problems)
            }
            sentinelRead = problems.problems.count == before
            if !sentinelRead { store.sentinel = nil }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let name = try block.optionalString("username") {
                guard !name.isEmpty, name.utf8.count <= 128, name.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else {
                    throw ConfigurationError(
                        .invalid, block.key("username"), "must be 1 to 128 printable ASCII characters")
                }
                store.username = name
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let value = try block.integer("timeout_ms", in: 1...10_000) { store.timeoutMilliseconds = Int(value) }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let text = try block.string("on_failure") {
                guard let onFailure = OnFailure(rawValue: text) else {
                    throw ConfigurationError(.invalid, block.key("on_failure"), "must be \"local\" or \"refuse\"")
                }
                store.onFailure = onFailure
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let prefix = try block.string("key_prefix") {
                // Printable ASCII without spaces: keys stay easy to list and to match in ACLs (`~duo-relay:*`).
                guard prefix.utf8.count <= 64, prefix.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else {
                    throw ConfigurationError(
                        .invalid, block.key("key_prefix"),
                        "must be at most 64 printable ASCII characters without spaces")
                }
                store.keyPrefix = prefix
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let path = try block.optionalString("ca_file") {
                guard !path.isEmpty else {
                    throw ConfigurationError(.invalid, block.key("ca_file"), "must be a file path")
                }
                store.caFile = path
            }
        }
        // A url at fault has been reported: what depends on it is not judged.
        if store.kind == .redis, urlRead, sentinelRead {
            if store.url != nil && store.sentinel != nil {
                problems.add(
                    ConfigurationError(
                        .invalid, block.path, "has both url and sentinel: give exactly one (sentinel names the primary)"
                    ))
            } else if let url = store.url {
                if store.caFile != nil && !url.tls {
                    problems.add(
                        ConfigurationError(.invalid, block.key("ca_file"), "applies only to a rediss:// (TLS) url"))
                }
            } else if let sentinel = store.sentinel {
                if store.caFile != nil && !sentinel.tls {
                    problems.add(
                        ConfigurationError(.invalid, block.key("ca_file"), "applies only with TLS (sentinel.tls true)"))
                }
            } else {
                problems.add(
                    ConfigurationError(.missing, block.key("url"), "(or sentinel) is required with kind \"redis\""))
            }
        }
        return store
    }
}

/// Redis Sentinel (docs/DESIGN.md, "Failover"): the sentinels that monitor the primary under the name `master`, asked in
/// turn where it is; `database` is `SELECT`ed on the primary; `tls` speaks TLS to the sentinels and the primary.
public struct RedisSentinel: Equatable, Sendable, CustomStringConvertible {
    public var master: String
    public var nodes: [ListenAddress]
    public var database = 0
    public var tls = false

    public init(master: String, nodes: [ListenAddress], database: Int = 0, tls: Bool = false) {
        self.master = master
        self.nodes = nodes
        self.database = database
        self.tls = tls
    }

    /// `sentinel duo-limits (10.0.0.1:26379, 10.0.0.2:26379)/0`.
    public var description: String {
        "sentinel \(master) (\(nodes.map(\.description).joined(separator: ", ")))/\(database)"
    }

    /// The block `limits_store.sentinel`; each problem is added to `problems` (nil when one was).
    static func parse(_ block: Reader, into problems: ConfigurationProblems.Collector) -> RedisSentinel? {
        let before = problems.problems.count
        problems.add(block.unknownKeys(["master", "nodes", "db", "tls"]))
        var sentinel = RedisSentinel(master: "", nodes: [])
        problems.attempt { () throws(ConfigurationError) in
            guard let master = try block.string("master") else {
                throw ConfigurationError(.missing, block.key("master"), "is required: the name the sentinels monitor")
            }
            // The sentinels' own rule for a name: no spaces or control characters (it travels in their messages).
            guard !master.isEmpty, master.utf8.count <= 128, master.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else {
                throw ConfigurationError(
                    .invalid, block.key("master"), "must be 1 to 128 printable ASCII characters without spaces")
            }
            sentinel.master = master
        }
        problems.attempt { () throws(ConfigurationError) in
            guard let value = block.fields["nodes"] else {
                throw ConfigurationError(.missing, block.key("nodes"), "is required: the sentinels as host:port")
            }
            guard case .array(let items) = value, !items.isEmpty, items.count <= 16 else {
                throw ConfigurationError(.invalid, block.key("nodes"), "must list 1 to 16 sentinels as \"host:port\"")
            }
            for item in items {
                guard case .string(let text) = item, let node = ListenAddress.parseNode(text) else {
                    throw ConfigurationError(
                        .invalid, block.key("nodes"), "must hold only \"host:port\" or \"[ipv6]:port\" strings")
                }
                sentinel.nodes.append(node)
            }
        }
        problems.attempt { () throws(ConfigurationError) in
            if let value = try block.integer("db", in: 0...1023) { sentinel.database = Int(value) }
        }
        problems.attempt { () throws(ConfigurationError) in
            guard let value = block.fields["tls"] else { return }
            guard case .bool(let tls) = value else {
                throw ConfigurationError(.invalid, block.key("tls"), "must be true or false")
            }
            sentinel.tls = tls
        }
        return problems.problems.count == before ? sentinel : nil
    }
}

extension ListenAddress {
    /// `host:port` or `[ipv6]:port`, a port 1...65535, a host name or address without spaces (a sentinel's
    /// address); nil for anything else.
    static func parseNode(_ text: String) -> ListenAddress? {
        guard text.utf8.count <= 300, text.allSatisfy({ $0.isASCII && !$0.isWhitespace }),
            let node = ListenAddress(text), node.port > 0, !node.host.contains("/"), !node.host.contains("@")
        else { return nil }
        return node
    }
}

/// `redis://host[:port][/db]` or `rediss://` (TLS). Never with user information: a password
/// belongs in `REDIS_PASSWORD`, a user name in `limits_store.username`.
public struct RedisURL: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: UInt16
    public var database: Int
    public var tls: Bool

    /// Errors name `key` and never repeat the text: it may carry a password.
    static func parse(_ text: String, key: String) throws(ConfigurationError) -> RedisURL {
        let tls: Bool
        let rest: Substring
        if text.hasPrefix("rediss://") {
            (tls, rest) = (true, text.dropFirst(9))
        } else if text.hasPrefix("redis://") {
            (tls, rest) = (false, text.dropFirst(8))
        } else {
            throw ConfigurationError(.invalid, key, "must be redis://host:port[/db] or rediss://host:port[/db]")
        }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") {
            if authority[..<at].contains(":") {
                throw ConfigurationError(
                    .invalid, key, "carries a password: give it in REDIS_PASSWORD, never in the configuration file")
            }
            throw ConfigurationError(.invalid, key, "carries a user name: give it in limits_store.username")
        }
        guard !rest.contains(where: { $0 == "?" || $0 == "#" || !$0.isASCII || $0 == " " }) else {
            throw ConfigurationError(.invalid, key, "must be redis://host:port[/db] without a query or fragment")
        }
        var host = authority
        var port: UInt16 = 6379
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                throw ConfigurationError(.invalid, key, "has an unclosed [ipv6] host")
            }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let value = UInt16(after.dropFirst()), value > 0 else {
                    throw ConfigurationError(.invalid, key, "has a port that is not 1..65535")
                }
                port = value
            }
        } else if let colon = authority.firstIndex(of: ":") {
            host = authority[..<colon]
            guard let value = UInt16(authority[authority.index(after: colon)...]), value > 0 else {
                throw ConfigurationError(.invalid, key, "has a port that is not 1..65535")
            }
            port = value
        }
        guard !host.isEmpty else { throw ConfigurationError(.invalid, key, "has no host") }
        var database = 0
        let path = rest[authorityEnd...].dropFirst()
        if !path.isEmpty {
            guard path.allSatisfy({ $0.isNumber }), let value = Int(path), value <= 1023 else {
                throw ConfigurationError(.invalid, key, "has a database number that is not 0..1023")
            }
            database = value
        }
        return RedisURL(host: String(host), port: port, database: database, tls: tls)
    }

    public init(host: String, port: UInt16, database: Int = 0, tls: Bool = false) {
        self.host = host
        self.port = port
        self.database = database
        self.tls = tls
    }

    public var description: String {
        (tls ? "rediss://" : "redis://") + (host.contains(":") ? "[\(host)]" : host) + ":\(port)/\(database)"
    }
}
