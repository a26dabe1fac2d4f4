import Foundation

/// What APNs answered to one push, and what the relay does about it (docs/DESIGN.md, "POST /v1/push").
public struct APNsAnswer: Equatable, Sendable {
    public var status: Int
    /// The `reason` of an error body, if any.
    public var reason: String?
    public var apnsID: String?

    public init(status: Int, reason: String?, apnsID: String?) {
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
    }

    /// Reads an APNs answer: status, `apns-id` header and the `{"reason": ...}` body.
    public init(status: Int, apnsID: String?, body: [UInt8]) {
        self.status = status
        self.apnsID = apnsID
        reason = nil
        if !body.isEmpty,
            let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let text = object["reason"] as? String
        {
            reason = text
        }
    }

    /// What the relay must do with this answer.
    public enum Action: Equatable, Sendable {
        /// Answer the channel (200 with the APNs id, or an error).
        case answer(Result<String?, RelayError>)
        /// The provider token expired: refresh it and send this push once more.
        case refreshTokenAndRetry
        /// APNs rejects the relay's key: answer 502 and tell the operator.
        case rejectedKey
    }

    /// The mapping table. `retryAfter` is the relay's choice for APNs 429 (APNs gives none).
    public func action(retryAfter: Int) -> Action {
        switch (status, reason) {
        case (200, _):
            return .answer(.success(apnsID))
        case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"):
            return .answer(.failure(.unregistered))
        case (429, "TooManyRequests"):
            return .answer(.failure(RelayError(.rateLimited, retryAfter: retryAfter, limit: .apns)))
        case (403, "ExpiredProviderToken"):
            return .refreshTokenAndRetry
        case (403, "InvalidProviderToken"):
            return .rejectedKey
        default:
            return .answer(.failure(.apnsRefused(reason: reason)))
        }
    }

    /// A connection has seen a valid provider token once it answers anything but 403 (docs/DESIGN.md,
    /// "The APNs request"): until then APNs allows it one stream. The relay
    /// passes this to its HTTP/2 client as the rule that proves a new connection.
    public static func provesToken(status: Int) -> Bool { status != 403 }

    /// Whether the connection that gave this answer must take no more pushes: APNs refused the provider token in
    /// force as an update too soon after the connection's last (TooManyProviderTokenUpdates). APNs keeps a token per
    /// connection: after ExpiredProviderToken on one connection the relay's new token goes to all of them, and a
    /// connection that refuses it would go on refusing it for 20 minutes, where a new connection takes it at once.
    /// The relay passes this to its HTTP/2 client, which replaces such a connection.
    public static func retiresConnection(status: Int, body: [UInt8]) -> Bool {
        status == 429 && APNsAnswer(status: status, apnsID: nil, body: body).reason == "TooManyProviderTokenUpdates"
    }

    /// See ``provesToken(status:)``.
    public var provesToken: Bool { Self.provesToken(status: status) }
}
