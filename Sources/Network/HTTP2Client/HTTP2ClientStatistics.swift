/// Counters of an ``HTTP2Client``, for monitoring and tests.
public struct HTTP2ClientStatistics: Sendable, Equatable {
    /// Connections started since the client was created. Each is one TCP connection: a
    /// connection that breaks is replaced by a new one, never reconnected in place.
    public var connectionsOpened: Int
    /// Connections retired because of a fault (GOAWAY, reset, a request that hit its deadline
    /// on it, a failed connect or TLS handshake).
    public var connectionsReplaced: Int
    /// Connections that take new requests now (not counting retired ones still draining).
    public var connectionsOpen: Int
    /// Requests accepted by `send` whose completion has not been called yet.
    public var requestsInFlight: Int
    /// Requests sent a second time because the server certainly had not processed the first try.
    public var retries: Int

    /// Creates statistics (all zero by default).
    public init(
        connectionsOpened: Int = 0, connectionsReplaced: Int = 0, connectionsOpen: Int = 0, requestsInFlight: Int = 0,
        retries: Int = 0
    ) {
        self.connectionsOpened = connectionsOpened
        self.connectionsReplaced = connectionsReplaced
        self.connectionsOpen = connectionsOpen
        self.requestsInFlight = requestsInFlight
        self.retries = retries
    }
}
