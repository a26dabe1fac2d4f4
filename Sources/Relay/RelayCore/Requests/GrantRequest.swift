/// A validated `POST /v1/grant` body.
public struct GrantRequest: Equatable, Sendable {
    public var token: [UInt8]
    public var environment: APNsEnvironment

    public init(token: [UInt8], environment: APNsEnvironment) {
        self.token = token
        self.environment = environment
    }

    /// Longest accepted token text (hex characters).
    public static let maximumTokenLength = 1024
    /// Bodies longer than this are answered 413 before they are read.
    public static let bodyLimit = 2048

    /// Parses and validates a body. A malformed body, a missing or mistyped field, or a token that
    /// is not 2...1024 hex characters of even length: `bad_request`, its detail naming the field or
    /// rule. An unknown environment name is `bad_request` too; whether a known one is configured is
    /// decided by the caller.
    public static func parse(_ body: [UInt8]) throws(RelayError) -> GrantRequest {
        let members = try RequestField.strings(fields, names: names, in: body)
        let text = members[0].text
        let length = text.utf8.count
        guard length >= 2, length <= maximumTokenLength, let token = Hex.decode(text) else {
            throw RelayError.badRequest.detail(tokenRule)
        }
        guard let environment = APNsEnvironment(name: members[1].text) else {
            throw RelayError.badRequest.detail(environmentRule)
        }
        return GrantRequest(token: token, environment: environment)
    }

    static let tokenRule: StaticString = "token: must be even-length hex, 2 to 1024 characters"
    static let environmentRule: StaticString = #"environment: must be "sandbox" or "production""#
    private static let names = ["token", "environment"]
    private static let fields = [
        RequestField(
            missing: "token: required (the APNs device token, hex)", notString: "token: must be a string",
            duplicated: "token: given more than once"),
        RequestField(
            missing: #"environment: required ("sandbox" or "production")"#,
            notString: "environment: must be a string", duplicated: "environment: given more than once"),
    ]
}

/// The `POST /v1/grant` answer.
public struct GrantResponse: Equatable, Sendable {
    public var grant: String
    public var expiresAt: UInt64

    public init(grant: String, expiresAt: UInt64) {
        self.grant = grant
        self.expiresAt = expiresAt
    }

    /// `{"grant":"...","expires_at":"2026-12-30T10:00:00Z"}` (the grant is base64url: no escaping needed).
    public var json: String {
        #"{"grant":""# + grant + #"","expires_at":""# + Timestamp.iso8601(expiresAt) + #""}"#
    }
}
