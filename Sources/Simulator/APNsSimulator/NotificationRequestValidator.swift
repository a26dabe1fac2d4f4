import ErrorCodes
import Foundation

/// The checks APNs makes on a request, apart from the provider token.
enum NotificationRequestValidator {
    static let pushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ]
    static let devicePathPrefix = "/3/device/"

    /// APNs' refusal: its status and its reason string (the code, as APNs names it).
    struct Rejection: CodedError {
        let status: Int
        let reason: String

        var code: ErrorCode<Rejection> { ErrorCode(reason) }
    }

    /// The validated fields of an acceptable request.
    struct Fields {
        let deviceToken: String
        let topic: String
        let pushType: String
        let priority: String
        let collapseID: String?
        let expiration: String?
        let payload: String
    }

    /// The request's `apns-id` when it is a well-formed UUID, else nil.
    static func requestedID(_ request: NotificationRequest) -> String? {
        guard let value = request.headers["apns-id"], UUID(uuidString: value) != nil else { return nil }
        return value
    }

    /// Method, path, headers and payload, in that order; the provider token is checked before this.
    static func validate(_ request: NotificationRequest, topics: Set<String>) -> Swift.Result<Fields, Rejection> {
        let headers = request.headers
        guard headers[":method"] == "POST" else { return .failure(Rejection(status: 405, reason: "MethodNotAllowed")) }
        guard let path = headers[":path"], path.hasPrefix(devicePathPrefix) else {
            return .failure(Rejection(status: 404, reason: "BadPath"))
        }
        let deviceToken = String(path.dropFirst(devicePathPrefix.count))
        if request.hasDuplicateHeader { return .failure(Rejection(status: 400, reason: "DuplicateHeaders")) }
        guard let topic = headers["apns-topic"], !topic.isEmpty else {
            return .failure(Rejection(status: 400, reason: "MissingTopic"))
        }
        guard topics.contains(topic) else { return .failure(Rejection(status: 400, reason: "TopicDisallowed")) }
        guard let pushType = headers["apns-push-type"], pushTypes.contains(pushType) else {
            return .failure(Rejection(status: 400, reason: "InvalidPushType"))
        }
        let priority = headers["apns-priority"] ?? "10"
        guard priority == "10" || priority == "5" || priority == "1" else {
            return .failure(Rejection(status: 400, reason: "BadPriority"))
        }
        if headers["apns-id"] != nil, requestedID(request) == nil {
            return .failure(Rejection(status: 400, reason: "BadMessageId"))
        }
        let collapseID = headers["apns-collapse-id"]
        if let collapseID, collapseID.utf8.count > 64 {
            return .failure(Rejection(status: 400, reason: "BadCollapseId"))
        }
        let expiration = headers["apns-expiration"]
        if let expiration, !isInteger(expiration) {
            return .failure(Rejection(status: 400, reason: "BadExpirationDate"))
        }
        if deviceToken.isEmpty { return .failure(Rejection(status: 400, reason: "MissingDeviceToken")) }
        guard (64...200).contains(deviceToken.utf8.count), deviceToken.utf8.allSatisfy(isHexDigit) else {
            return .failure(Rejection(status: 400, reason: "BadDeviceToken"))
        }
        if request.bodyLength == 0 { return .failure(Rejection(status: 400, reason: "PayloadEmpty")) }
        if request.bodyLength > NotificationRequest.maximumPayloadSize {
            return .failure(Rejection(status: 413, reason: "PayloadTooLarge"))
        }
        guard isJSONObject(request.body) else { return .failure(Rejection(status: 400, reason: "BadPayload")) }
        return .success(
            Fields(
                deviceToken: deviceToken, topic: topic, pushType: pushType, priority: priority,
                collapseID: collapseID, expiration: expiration, payload: String(decoding: request.body, as: UTF8.self)
            ))
    }

    private static func isInteger(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 18
            && text.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            return true
        default:
            return false
        }
    }

    private static func isJSONObject(_ bytes: [UInt8]) -> Bool {
        guard String(validating: bytes, as: UTF8.self) != nil else { return false }
        return (try? JSONSerialization.jsonObject(with: Data(bytes))) is [String: Any]
    }
}
