import MonotonicTime
import RelayCrypto
import Synchronization

/// The identity a provider token is signed with: one APNs key, its key id and the team.
public struct ProviderCredentials: Sendable {
    public let keyID: String
    public let teamID: String
    public let key: P256.Signing.PrivateKey

    public init(keyID: String, teamID: String, key: P256.Signing.PrivateKey) {
        self.keyID = keyID
        self.teamID = teamID
        self.key = key
    }

    /// Signs a token with `iat` = `issuedAt` (Unix seconds, an integer as APNs requires).
    public func sign(issuedAt: UInt64) throws(CryptoError) -> String {
        try JWT.signES256(
            header: #"{"alg":"ES256","kid":""# + keyID + #""}"#,
            claims: #"{"iss":""# + teamID + #"","iat":"# + String(issuedAt) + "}",
            using: key)
    }
}

/// One cached provider token per environment (docs/DESIGN.md, "Provider token"): refreshed before it is
/// 50 minutes old, never more often than once per 20 minutes, except after APNs answered
/// ExpiredProviderToken.
public final class ProviderToken: Sendable {
    /// Age at which a token is replaced (well before APNs' 60 minutes and our 50).
    public static let refreshAge: UInt64 = 40 * 60 * 1_000_000_000
    /// APNs answers TooManyProviderTokenUpdates to tokens changed more often than this. A routine refresh waits
    /// at least this long (`refreshAge` is longer); the refresh after ExpiredProviderToken does not, but only one
    /// such refresh is made per interval: an APNs that calls every new token expired (a wrong wall clock) gets
    /// no new token per push.
    public static let minimumInterval: UInt64 = 20 * 60 * 1_000_000_000

    private struct Current {
        var token: String
        /// `bearer <token>`: the `authorization` field's value, made once per token rather than once per push.
        var header: String
        var signedAt: Instant
        /// When the last refresh after ExpiredProviderToken was made, if one was.
        var forcedAt: Instant?
    }

    private let credentials: Mutex<ProviderCredentials>
    private let current = Mutex<Current?>(nil)
    private let refreshCount = Atomic<Int>(0)
    private let clock: any RelayClock

    public init(credentials: ProviderCredentials, clock: any RelayClock) {
        self.credentials = Mutex(credentials)
        self.clock = clock
    }

    /// The key, key id and team this signs with.
    public var signer: ProviderCredentials { credentials.withLock { $0 } }

    /// How many tokens have been signed.
    public var refreshes: Int { refreshCount.load(ordering: .relaxed) }

    /// The token to send now, signing a fresh one when the cached one is too old.
    public func token() throws(CryptoError) -> String {
        try authorization().token
    }

    /// The token to send now (as ``token()``) and its `authorization` field value, `bearer <token>`.
    public func authorization() throws(CryptoError) -> (token: String, header: String) {
        let now = clock.monotonicNow
        typealias Answer = (token: String, header: String)
        return try current.withLock { (current: inout Current?) throws(CryptoError) -> Answer in
            if let cached = current, now - cached.signedAt < max(Self.refreshAge, Self.minimumInterval) {
                return (cached.token, cached.header)
            }
            let token = try refresh(&current, now: now, forced: false)
            return (token, current?.header ?? "bearer " + token)
        }
    }

    /// APNs answered ExpiredProviderToken to `token`: replace it now, unless a concurrent push
    /// already did. Returns the token to retry with, or nil when a refresh after ExpiredProviderToken was
    /// already made within ``minimumInterval`` (a retry with the same token would be refused again).
    public func tokenAfterExpiry(of token: String) throws(CryptoError) -> String? {
        let now = clock.monotonicNow
        return try current.withLock { (current: inout Current?) throws(CryptoError) -> String? in
            if let cached = current, cached.token != token {
                return cached.token
            }
            if let forcedAt = current?.forcedAt, now - forcedAt < Self.minimumInterval {
                return nil
            }
            return try refresh(&current, now: now, forced: true)
        }
    }

    /// True when `other` would sign the same tokens (same key, key id and team).
    public func signs(like other: ProviderCredentials) -> Bool {
        credentials.withLock { current in
            current.keyID == other.keyID && current.teamID == other.teamID
                && current.key.publicKey.pemRepresentation == other.key.publicKey.pemRepresentation
        }
    }

    private func refresh(_ current: inout Current?, now: Instant, forced: Bool) throws(CryptoError) -> String {
        let signer = credentials.withLock { $0 }
        let token = try signer.sign(issuedAt: clock.unixSeconds)
        current = Current(
            token: token, header: "bearer " + token, signedAt: now, forcedAt: forced ? now : current?.forcedAt)
        refreshCount.add(1, ordering: .relaxed)
        return token
    }
}
