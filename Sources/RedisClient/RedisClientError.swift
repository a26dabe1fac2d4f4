/// Why the store gave no usable answer. Equality is by ``code``; the ``reason`` never holds a
/// password, a key or a reply's bytes.
public struct RedisClientError: Error, Equatable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// No connection: the host cannot be resolved or reached, or refuses (also a failed connect).
        public static let refused = Code("refused")
        /// No reply within the timeout (a request), or no connection set up within the connect timeout.
        public static let timeout = Code("timeout")
        /// The TLS handshake failed or the server's certificate or name was not accepted.
        public static let tls = Code("tls")
        /// AUTH was refused, or the server requires AUTH and none was configured.
        public static let auth = Code("auth")
        /// The server sent something that is not RESP, or a reply of an unexpected type or value.
        public static let protocolError = Code("protocol")
        /// The connection closed or broke.
        public static let closed = Code("closed")
        /// The script (or command) answered with an error reply.
        public static let script = Code("script")
        /// Not connected now: the request was not sent (the caller decides without the store).
        public static let unavailable = Code("unavailable")
        /// The configuration cannot work (the CA file cannot be read).
        public static let invalidConfiguration = Code("invalid_configuration")
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code): \(reason)" }

    public static func == (lhs: RedisClientError, rhs: RedisClientError) -> Bool { lhs.code == rhs.code }
}
