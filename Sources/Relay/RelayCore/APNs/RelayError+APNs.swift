/// The three 502 `apns` answers (docs/DESIGN.md, "POST /v1/push"): what became of a push the relay could not
/// get a verdict for, in a fixed sentence a client can show a person. Clients decide by `error`; the detail
/// tells the person whether the push may still arrive (`duo-relay push` says "not delivered" only for the first
/// two kinds).
extension RelayError {
    /// APNs was never reached (no connection, the proxy gave no tunnel, no provider token, the environment has
    /// no key now, or the deadline passed before the push was written): it was not delivered.
    public static let apnsNotReached = RelayError(.apns, detail: "APNs was not reached: the push was not delivered")

    /// The push was written to APNs and no answer came (a timeout, a connection that ended): it may or may not
    /// have been delivered.
    public static let apnsNoAnswer = RelayError(
        .apns, detail: "sent to APNs, but no answer came: the push may or may not have been delivered")

    /// APNs answered and refused the push with `reason`: it was not delivered. APNs' reason is named when it is
    /// one Apple documents (a detail never carries bytes the relay did not write itself).
    public static func apnsRefused(reason: String?) -> RelayError {
        RelayError(.apns, detail: refusalDetail(reason))
    }

    /// How the details of the two answers that say the push was not delivered begin.
    public static let notDeliveredDetailPrefixes = ["APNs refused the push", "APNs was not reached"]

    private static func refusalDetail(_ reason: String?) -> StaticString {
        switch reason {
        case "BadCollapseId": "APNs refused the push (BadCollapseId): it was not delivered"
        case "BadDeviceToken": "APNs refused the push (BadDeviceToken): it was not delivered"
        case "BadExpirationDate": "APNs refused the push (BadExpirationDate): it was not delivered"
        case "BadMessageId": "APNs refused the push (BadMessageId): it was not delivered"
        case "BadPriority": "APNs refused the push (BadPriority): it was not delivered"
        case "BadTopic": "APNs refused the push (BadTopic): it was not delivered"
        case "DeviceTokenNotForTopic": "APNs refused the push (DeviceTokenNotForTopic): it was not delivered"
        case "DuplicateHeaders": "APNs refused the push (DuplicateHeaders): it was not delivered"
        case "IdleTimeout": "APNs refused the push (IdleTimeout): it was not delivered"
        case "InvalidPushType": "APNs refused the push (InvalidPushType): it was not delivered"
        case "MissingDeviceToken": "APNs refused the push (MissingDeviceToken): it was not delivered"
        case "MissingTopic": "APNs refused the push (MissingTopic): it was not delivered"
        case "PayloadEmpty": "APNs refused the push (PayloadEmpty): it was not delivered"
        case "TopicDisallowed": "APNs refused the push (TopicDisallowed): it was not delivered"
        case "BadCertificate": "APNs refused the push (BadCertificate): it was not delivered"
        case "BadCertificateEnvironment": "APNs refused the push (BadCertificateEnvironment): it was not delivered"
        case "ExpiredProviderToken": "APNs refused the push (ExpiredProviderToken): it was not delivered"
        case "Forbidden": "APNs refused the push (Forbidden): it was not delivered"
        case "InvalidProviderToken": "APNs refused the push (InvalidProviderToken): it was not delivered"
        case "MissingProviderToken": "APNs refused the push (MissingProviderToken): it was not delivered"
        case "BadPath": "APNs refused the push (BadPath): it was not delivered"
        case "MethodNotAllowed": "APNs refused the push (MethodNotAllowed): it was not delivered"
        case "ExpiredToken": "APNs refused the push (ExpiredToken): it was not delivered"
        case "Unregistered": "APNs refused the push (Unregistered): it was not delivered"
        case "PayloadTooLarge": "APNs refused the push (PayloadTooLarge): it was not delivered"
        case "TooManyProviderTokenUpdates": "APNs refused the push (TooManyProviderTokenUpdates): it was not delivered"
        case "TooManyRequests": "APNs refused the push (TooManyRequests): it was not delivered"
        case "InternalServerError": "APNs refused the push (InternalServerError): it was not delivered"
        case "ServiceUnavailable": "APNs refused the push (ServiceUnavailable): it was not delivered"
        case "Shutdown": "APNs refused the push (Shutdown): it was not delivered"
        case "UnrelatedKeyIdInToken": "APNs refused the push (UnrelatedKeyIdInToken): it was not delivered"
        case "BadEnvironmentKeyIdInToken": "APNs refused the push (BadEnvironmentKeyIdInToken): it was not delivered"
        default: "APNs refused the push: it was not delivered"
        }
    }
}
