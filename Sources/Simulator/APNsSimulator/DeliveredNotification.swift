/// A notification the simulator accepted (answered 200), with what the provider sent.
public struct DeliveredNotification: Sendable, Codable, Equatable {
    /// The `apns-id` answered: the request's, or a generated UUID.
    public let apnsID: String
    /// The device token from the request path, as sent.
    public let deviceToken: String
    /// The `apns-topic` header.
    public let topic: String
    /// The `apns-push-type` header.
    public let pushType: String
    /// The `apns-priority` header, or "10" when absent.
    public let priority: String
    /// The `apns-collapse-id` header, if any.
    public let collapseID: String?
    /// The `apns-expiration` header, if any.
    public let expiration: String?
    /// The request body (a JSON object), as sent.
    public let payload: String
    /// The connection's sequence number (1 for the first connection the simulator accepted).
    public let connection: Int
    /// The HTTP/2 stream id of the request.
    public let stream: Int32
    /// The provider token's key id (`kid`).
    public let keyID: String

    /// Creates a record; the simulator makes these, tests may compare against them.
    public init(
        apnsID: String, deviceToken: String, topic: String, pushType: String, priority: String, collapseID: String?,
        expiration: String?, payload: String, connection: Int, stream: Int32, keyID: String
    ) {
        self.apnsID = apnsID
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.collapseID = collapseID
        self.expiration = expiration
        self.payload = payload
        self.connection = connection
        self.stream = stream
        self.keyID = keyID
    }
}
