/// An answer the relay gives instead of success: an error code from DESIGN.md, its HTTP status,
/// and, for limits, when to try again. Every error answer is built from one of these, in one place.
public struct RelayError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The stable machine-readable code sent as `{"error":"<code>"}`.
    public struct Code: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

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
    }

    public let code: Code
    /// Seconds after which a retry may succeed (`Retry-After`), for 429 and 503.
    public let retryAfter: Int?

    public init(_ code: Code, retryAfter: Int? = nil) {
        self.code = code
        self.retryAfter = retryAfter
    }

    /// The HTTP status DESIGN.md assigns to this code.
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
        default: 500
        }
    }

    /// The JSON body of the answer.
    public var body: String { #"{"error":""# + code.rawValue + #""}"# }

    public var description: String { code.rawValue }

    public static let badRequest = RelayError(.badRequest)
    public static let grantInvalid = RelayError(.grantInvalid)
    public static let grantExpired = RelayError(.grantExpired)
    public static let apns = RelayError(.apns)
    public static let tooLarge = RelayError(.tooLarge)
    public static let notFound = RelayError(.notFound)
    public static let methodNotAllowed = RelayError(.methodNotAllowed)
    public static let environmentUnavailable = RelayError(.environmentUnavailable)
    public static let unregistered = RelayError(.unregistered)
}
