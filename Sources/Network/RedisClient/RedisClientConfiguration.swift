/// Where and how a ``RedisPipeline`` connects.
public struct RedisClientConfiguration: Sendable {
    public var host: String
    public var port: UInt16
    /// `rediss://`: TLS, the server's certificate and name verified.
    public var useTLS = false
    /// A PEM CA bundle added to the system's roots (TLS only).
    public var caFile: String? = nil
    /// The database `SELECT`ed after connecting (0: none sent).
    public var database = 0
    /// AUTH's user name (Redis 6 ACLs); only sent with a password.
    public var username: String? = nil
    /// AUTH's password; nil: no AUTH.
    public var password: String? = nil
    /// How long a request may wait for its reply.
    public var timeout: Duration = .milliseconds(100)
    /// How long connecting, TLS and the set-up commands may take.
    public var connectTimeout: Duration = .seconds(2)
    /// Redis Sentinel: the primary is asked of these sentinels (``host`` and ``port`` are then unused).
    public var sentinel: Sentinel? = nil
    /// The Lua script that ``RedisPipeline/evaluate(keys:arguments:completion:)`` runs, loaded once per connection.
    public var script: String

    public init(host: String, port: UInt16, script: String) {
        self.host = host
        self.port = port
        self.script = script
    }

    /// Where the sentinels are and what they call the primary.
    public struct Sentinel: Sendable {
        /// The name the sentinels monitor the primary by.
        public var master: String
        /// The sentinels, asked in turn.
        public var nodes: [(host: String, port: UInt16)]
        /// AUTH's password for the sentinels; nil: no AUTH.
        public var password: String? = nil

        public init(master: String, nodes: [(host: String, port: UInt16)]) {
            self.master = master
            self.nodes = nodes
        }
    }
}
