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
    /// is not 2...1024 hex characters of even length: `bad_request`. An unknown environment name is
    /// `bad_request` too; whether a known one is configured is decided by the caller.
    public static func parse(_ body: [UInt8]) throws(RelayError) -> GrantRequest {
        guard let members = JSONObjectScanner.members(["token", "environment"], in: body),
            case .string(let text) = members[0], case .string(let name) = members[1]
        else { throw .badRequest }
        let length = text.utf8.count
        guard length >= 2, length <= maximumTokenLength, let token = Hex.decode(text),
            let environment = APNsEnvironment(name: name)
        else { throw .badRequest }
        return GrantRequest(token: token, environment: environment)
    }
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
