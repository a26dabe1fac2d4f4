import ErrorCodes

/// An answer the relay gives instead of success: an error code from docs/DESIGN.md, its HTTP status,
/// and, for limits, when to try again. Every error answer is built from one of these, in one place.
///
/// Two errors are equal when their code, `retryAfter` and `limit` are: `detail` is for people,
/// and clients decide by `error` (and `limit`), never by `detail`.
public struct RelayError: CodedError, Sendable {
    /// The stable machine-readable code sent as `{"error":"<code>"}`.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        public var description: String { rawValue }

        public static let badRequest = Code(rawValue: "bad_request")
        public static let environmentUnavailable = Code(rawValue: "environment_unavailable")
        public static let grantInvalid = Code(rawValue: "grant_invalid")
        public static let grantExpired = Code(rawValue: "grant_expired")
        public static let unregistered = Code(rawValue: "unregistered")
        public static let tooLarge = Code(rawValue: "too_large")
        public static let rateLimited = Code(rawValue: "rate_limited")
        public static let apns = Code(rawValue: "apns")
        public static let overloaded = Code(rawValue: "overloaded")
        public static let notFound = Code(rawValue: "not_found")
        public static let methodNotAllowed = Code(rawValue: "method_not_allowed")
        /// A transfer coding other than `chunked` (docs/DESIGN.md, "The HTTP front").
        public static let notImplemented = Code(rawValue: "not_implemented")
        /// An HTTP version other than 1.0 and 1.1.
        public static let versionNotSupported = Code(rawValue: "version_not_supported")
        /// A fault of the relay itself (a grant that could not be sealed): never the client's, never expected.
        public static let internalError = Code(rawValue: "internal_error")
    }

    /// Which limit answered a 429, sent as `"limit":"<name>"`.
    public struct Limit: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The per-phone limit (pushes per device token).
        public static let phone = Limit(rawValue: "phone")
        /// The per-client-address limit on `/v1/*`.
        public static let address = Limit(rawValue: "address")
        /// APNs answered 429 TooManyRequests.
        public static let apns = Limit(rawValue: "apns")
    }

    public let code: Code
    /// Seconds after which a retry may succeed (`Retry-After`), for 429 and 503.
    public let retryAfter: Int?
    /// Which limit refused, for 429.
    public let limit: Limit?
    /// One short English sentence naming the field or rule at fault. A `StaticString`, so that it
    /// can never carry a value from the request, and costs nothing until an error is answered.
    public let staticDetail: StaticString?

    public init(_ code: Code, retryAfter: Int? = nil, limit: Limit? = nil, detail: StaticString? = nil) {
        self.code = code
        self.retryAfter = retryAfter
        self.limit = limit
        self.staticDetail = detail
    }

    /// The same error with another detail.
    public func detail(_ detail: StaticString) -> RelayError {
        RelayError(code, retryAfter: retryAfter, limit: limit, detail: detail)
    }

    /// The detail as text, if any.
    public var detail: String? { staticDetail.map { $0.description } }

    /// The detail, or the code where there is none (``ErrorCodes/CodedError``).
    public var reason: String { detail ?? code.rawValue }

    public static func == (lhs: RelayError, rhs: RelayError) -> Bool {
        lhs.code == rhs.code && lhs.retryAfter == rhs.retryAfter && lhs.limit == rhs.limit
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(retryAfter)
        hasher.combine(limit)
    }

    /// The HTTP status docs/DESIGN.md assigns to this code.
    public var status: Int {
        switch code {
        case .badRequest, .environmentUnavailable: 400
        case .grantInvalid, .grantExpired: 401
        case .notFound: 404
        case .methodNotAllowed: 405
        case .unregistered: 410
        case .tooLarge: 413
        case .rateLimited: 429
        case .apns: 502
        case .overloaded: 503
        case .internalError: 500
        case .notImplemented: 501
        case .versionNotSupported: 505
        default: 500
        }
    }

    /// The JSON body of the answer: `error`, then `detail` and `limit` when set.
    public var body: String {
        var text = #"{"error":""# + code.rawValue + #"""#
        if let detail { text += #","detail":""# + Self.escaped(detail) + #"""# }
        if let limit { text += #","limit":""# + limit.rawValue + #"""# }
        return text + "}"
    }

    public var description: String { code.rawValue }

    /// Details are the relay's own ASCII sentences; only their quotes need escaping.
    private static func escaped(_ text: String) -> String {
        guard text.utf8.contains(UInt8(ascii: "\"")) || text.utf8.contains(UInt8(ascii: "\\")) else { return text }
        var out = ""
        for character in text {
            if character == "\"" || character == "\\" { out.append("\\") }
            out.append(character)
        }
        return out
    }

    public static let badRequest = RelayError(.badRequest)
    public static let grantInvalid = RelayError(
        .grantInvalid, detail: "grant: cannot be opened by this relay; ask the phone for a new one")
    public static let grantExpired = RelayError(
        .grantExpired, detail: "grant: its lifetime has passed; ask the phone for a new one")
    public static let apns = RelayError(.apns)
    public static let tooLarge = RelayError(.tooLarge)
    public static let notFound = RelayError(.notFound)
    public static let methodNotAllowed = RelayError(.methodNotAllowed)
    public static let environmentUnavailable = RelayError(
        .environmentUnavailable, detail: "environment: this relay has no APNs key for it")
    public static let unregistered = RelayError(
        .unregistered, detail: "APNs: this device token can never be delivered to; drop the registration")
}
