import ErrorCodes
import Foundation
import RelayCrypto

/// Checks APNs provider tokens (ES256 JWTs) the way APNs does, and remembers per connection
/// which token is current, so a connection's token is verified once, not on every request.
struct ProviderTokenVerifier: Sendable {
    /// A token older than this (seconds) is answered 403 ExpiredProviderToken.
    static let maximumAge: Int64 = 3600
    /// A token whose `iat` is further in the future than this (seconds) is invalid.
    static let allowedClockSkew: Int64 = 60
    /// A connection may switch to a token issued at least this long (seconds) after its current one.
    static let minimumUpdateInterval: Int64 = 20 * 60

    let teamID: String
    let keys: [String: P256.Signing.PublicKey]

    /// What a connection knows about provider tokens.
    struct ConnectionState {
        /// The token that last passed verification on this connection, with its kid and iat.
        var current: String?
        var keyID = ""
        var issuedAt: Int64 = 0
        /// The token string most recently presented (valid or not), to count distinct tokens cheaply.
        var lastPresented: String?
        /// Set once the connection answered 403 ExpiredProviderToken: the next new token is accepted
        /// whatever its age difference.
        var mayUpdateAtOnce = false
    }

    enum Result: Equatable {
        case valid(keyID: String)
        case rejected(status: Int, reason: String)
    }

    /// Checks `authorization` (the header value, or nil when absent) at `now` (seconds since 1970).
    func check(authorization: String?, now: Int64, state: inout ConnectionState) -> Result {
        guard let authorization, !authorization.isEmpty else {
            return .rejected(status: 403, reason: "MissingProviderToken")
        }
        let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            return .rejected(status: 403, reason: "InvalidProviderToken")
        }
        let token = String(parts[1])
        if token == state.current {
            return isExpired(issuedAt: state.issuedAt, now: now)
                ? .rejected(status: 403, reason: "ExpiredProviderToken") : .valid(keyID: state.keyID)
        }
        let verified: (keyID: String, issuedAt: Int64)
        switch verify(token) {
        case .success(let value): verified = value
        case .failure(let rejection): return .rejected(status: 403, reason: rejection.reason)
        }
        if verified.issuedAt > now + Self.allowedClockSkew {
            return .rejected(status: 403, reason: "InvalidProviderToken")
        }
        if isExpired(issuedAt: verified.issuedAt, now: now) {
            return .rejected(status: 403, reason: "ExpiredProviderToken")
        }
        if state.current != nil, !state.mayUpdateAtOnce,
            verified.issuedAt - state.issuedAt < Self.minimumUpdateInterval
        {
            return .rejected(status: 429, reason: "TooManyProviderTokenUpdates")
        }
        state.mayUpdateAtOnce = false
        state.current = token
        state.keyID = verified.keyID
        state.issuedAt = verified.issuedAt
        return .valid(keyID: verified.keyID)
    }

    private func isExpired(issuedAt: Int64, now: Int64) -> Bool {
        now - issuedAt > Self.maximumAge
    }

    /// APNs' refusal of a provider token, by its reason string (the code, as APNs names it).
    struct Rejection: CodedError {
        let reason: String
        var code: ErrorCode<Rejection> { ErrorCode(reason) }
        static let invalid = Rejection(reason: "InvalidProviderToken")
    }

    private struct Header: Decodable {
        let alg: String
        let kid: String
    }

    private struct Claims: Decodable {
        let iss: String
        /// Decoding as an integer rejects a string, a fraction or a boolean `iat`.
        let iat: Int64
    }

    /// Signature, algorithm, key id and issuer; `iat` is only parsed here.
    private func verify(_ token: String) -> Swift.Result<(keyID: String, issuedAt: Int64), Rejection> {
        guard let parts = JWT.decode(token),
            let header = try? JSONDecoder().decode(Header.self, from: Data(parts.header)),
            header.alg == "ES256",
            let key = keys[header.kid],
            JWT.verifyES256(token, using: key),
            let claims = try? JSONDecoder().decode(Claims.self, from: Data(parts.claims)),
            claims.iss == teamID
        else { return .failure(.invalid) }
        return .success((header.kid, claims.iat))
    }
}
