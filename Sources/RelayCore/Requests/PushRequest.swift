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
    public static let maximumGrantLength = (2 + 12 + 9 + GrantCodec.maximumTokenBytes + 16) * 4 / 3 + 2
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
    /// `bad_request`. The grant's content is judged when it is opened.
    public static func parse(_ body: [UInt8]) throws(RelayError) -> PushRequest {
        guard let members = JSONObjectScanner.members(["grant", "sealed", "id", "thread"], in: body),
            case .string(let grant) = members[0], case .string(let sealed) = members[1],
            case .string(let id) = members[2], case .string(let thread) = members[3]
        else { throw .badRequest }
        guard sealed.utf8.count == sealedTextLength, Base64.decodedCount(sealed) == sealedByteCount,
            Hex.isHex(id, count: 64), Hex.isHex(thread, count: 64)
        else { throw .badRequest }
        return PushRequest(grant: grant, sealed: sealed, id: id, thread: thread)
    }
}
