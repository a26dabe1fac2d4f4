import RelayCrypto

/// A validated `POST /v1/push` body. `sealed` stays as the client's canonical base64 text,
/// which is exactly what the APNs payload carries.
public struct PushRequest: Equatable, Sendable {
    public var grant: String
    public var sealed: String
    public var id: String
    public var thread: String

    /// The size of the end-to-end encrypted message.
    public static let sealedByteCount = 2934
    /// Its standard base64 length.
    public static let sealedTextLength = (sealedByteCount + 2) / 3 * 4
    /// Longest grant text that could open (a 1024-hex-character token).
    public static let maximumGrantLength = GrantCodec.maximumSealedBytes * 4 / 3 + 2
    /// Bodies longer than this are answered 413 before they are read.
    public static let bodyLimit = 8192

    public init(grant: String, sealed: String, id: String, thread: String) {
        self.grant = grant
        self.sealed = sealed
        self.id = id
        self.thread = thread
    }

    /// Parses and validates a body: every field present and a string; `sealed` canonical standard
    /// base64 of exactly 2934 bytes; `id` and `thread` 64 hex digits of either case. Otherwise
    /// `bad_request`, its detail naming the field or rule. The grant's content is judged when it is opened.
    public static func parse(_ body: [UInt8]) throws(RelayError) -> PushRequest {
        let members = try RequestField.strings(fields, names: names, in: body)
        let sealed = members[1].text
        guard sealed.utf8.count == sealedTextLength, Base64.decodedCount(sealed) == sealedByteCount else {
            throw RelayError.badRequest.detail(sealedRule)
        }
        let id = members[2].text
        guard Hex.isHex(id, count: 64) else { throw RelayError.badRequest.detail(idRule) }
        let thread = members[3].text
        guard Hex.isHex(thread, count: 64) else { throw RelayError.badRequest.detail(threadRule) }
        return PushRequest(grant: members[0].text, sealed: sealed, id: id, thread: thread)
    }

    static let sealedRule: StaticString = "sealed: must be standard base64 of exactly 2934 bytes"
    static let idRule: StaticString = "id: must be 64 hex characters"
    static let threadRule: StaticString = "thread: must be 64 hex characters"
    private static let names = ["grant", "sealed", "id", "thread"]
    private static let fields = [
        RequestField(
            missing: "grant: required (the grant the phone obtained from /v1/grant)",
            notString: "grant: must be a string", duplicated: "grant: given more than once"),
        RequestField(
            missing: "sealed: required (standard base64 of exactly 2934 bytes)",
            notString: "sealed: must be a string", duplicated: "sealed: given more than once"),
        RequestField(
            missing: "id: required (64 hex characters)", notString: "id: must be a string",
            duplicated: "id: given more than once"),
        RequestField(
            missing: "thread: required (64 hex characters)", notString: "thread: must be a string",
            duplicated: "thread: given more than once"),
    ]
}
