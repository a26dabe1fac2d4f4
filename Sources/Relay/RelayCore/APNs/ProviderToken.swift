import MonotonicTime
import RelayCrypto
import Synchronization

/// One cached provider token per environment (docs/DESIGN.md, "The APNs request"): refreshed before it is 50 minutes
/// old, never more often than once per 20 minutes, except after APNs answered ExpiredProviderToken.
///
/// A push only reads the token in force (``authorization()``): it never signs, and never waits for a signature. New
/// tokens are signed by ``refreshIfDue()``, which the environment's signing thread calls when ``nextRefresh`` comes
/// (and which `check` and the tests call directly): a key in a token may take tens of milliseconds to sign, or fail
/// for a while, and the token in force serves meanwhile for as long as it is valid.
public final class ProviderToken: Sendable {
    /// Age at which a token is replaced (well before APNs' 60 minutes and our 50).
    public static let refreshAge: UInt64 = 40 * 60 * 1_000_000_000
    /// APNs answers TooManyProviderTokenUpdates to tokens changed more often than this. A routine refresh waits
    /// at least this long (`refreshAge` is longer); the refresh after ExpiredProviderToken does not, but only one
    /// such refresh is made per interval: an APNs that calls every new token expired (a wrong wall clock) gets
    /// no new token per push.
    public static let minimumInterval: UInt64 = 20 * 60 * 1_000_000_000
    /// How long a token is sent while no new one can be signed: APNs refuses tokens older than an hour, and five
    /// minutes are left for the difference between the relay's clock and APNs'.
    public static let validity: UInt64 = 55 * 60 * 1_000_000_000
    /// The wait before signing again after a failure, doubled after each further failure up to ``maximumRetry``.
    public static let firstRetry: UInt64 = 1_000_000_000
    public static let maximumRetry: UInt64 = 60 * 1_000_000_000

    private struct Current {
        var token: String
        /// `bearer <token>`: the `authorization` field's value, made once per token rather than once per push.
        var header: String
        var signedAt: Instant
    }

    private struct State {
        var current: Current?
        /// When the last refresh after ExpiredProviderToken was made, if one was.
        var forcedAt: Instant?
        /// A refresh after ExpiredProviderToken is asked for, and who waits for its token.
        var forceRequested = false
        var waiters: [@Sendable (String?) -> Void] = []
        /// Signing failures in a row, and when to try again.
        var failures = 0
        var retryAt: Instant?
        /// No signing thread will sign again (the gateway was retired or the relay stops).
        var closed = false
    }

    /// The key, key id and team this signs with.
    public let signer: ProviderCredentials
    private let state = Mutex(State())
    private let refreshCount = Atomic<Int>(0)
    private let clock: any RelayClock
    /// What tells the signing thread that a refresh is wanted now (after ExpiredProviderToken).
    private let wake = Mutex<(@Sendable () -> Void)?>(nil)

    public init(credentials: ProviderCredentials, clock: any RelayClock) {
        signer = credentials
        self.clock = clock
    }

    /// How many tokens have been signed.
    public var refreshes: Int { refreshCount.load(ordering: .relaxed) }

    /// The token to send now, nil when there is none that is valid (none signed yet, or the key has not been able to
    /// sign for longer than ``validity``). Never signs.
    public func token() -> String? {
        authorization()?.token
    }

    /// The token to send at `now` (the clock's time, which a caller that read it already passes on) and its
    /// `authorization` field value, `bearer <token>`; nil as for ``token()``.
    public func authorization(now: Instant? = nil) -> (token: String, header: String)? {
        let now = now ?? clock.monotonicNow
        return state.withLock { state -> (token: String, header: String)? in
            guard let current = state.current, now - current.signedAt < Self.validity else { return nil }
            return (current.token, current.header)
        }
    }

    /// When ``refreshIfDue()`` next has a token to sign: now when there is none or one is asked for, at the retry
    /// after a failure, otherwise when the token in force reaches ``refreshAge``.
    public var nextRefresh: Instant {
        state.withLock { state in
            guard let current = state.current, !state.forceRequested else { return 0 }
            if let retryAt = state.retryAt { return retryAt }
            return current.signedAt + max(Self.refreshAge, Self.minimumInterval)
        }
    }

    /// What ``refreshIfDue()`` did.
    public enum Refresh: Equatable, Sendable {
        /// No token was due.
        case notDue
        /// A new token is in force; `recovered`: after one or more failures.
        case signed(recovered: Bool)
        /// The key could not sign; `first`: the first failure after a success (the moment to say so).
        case failed(CryptoError, first: Bool)
    }

    /// Signs a new token when one is due (see ``nextRefresh``). No lock is held while the key signs; the caller is the
    /// environment's signing thread, never a worker's loop.
    @discardableResult
    public func refreshIfDue() -> Refresh {
        let now = clock.monotonicNow
        let forced: Bool? = state.withLock { state in
            if state.forceRequested { return true }
            guard let current = state.current else { return false }
            if let retryAt = state.retryAt { return now >= retryAt ? false : nil }
            return now - current.signedAt >= max(Self.refreshAge, Self.minimumInterval) ? false : nil
        }
        guard let forced else { return .notDue }
        let token: String
        do {
            token = try signer.sign(issuedAt: clock.unixSeconds)
        } catch {
            let (first, waiters) = state.withLock { state in
                state.failures += 1
                let wait = min(Self.maximumRetry, Self.firstRetry << UInt64(min(state.failures - 1, 16)))
                state.retryAt = now + wait
                let waiters = forced ? state.waiters : []
                if forced {
                    state.forceRequested = false
                    state.waiters = []
                }
                return (state.failures == 1, waiters)
            }
            for waiter in waiters { waiter(nil) }
            return .failed(error, first: first)
        }
        let (recovered, waiters) = state.withLock { state in
            let recovered = state.failures > 0
            state.current = Current(token: token, header: "bearer " + token, signedAt: now)
            state.failures = 0
            state.retryAt = nil
            let waiters = state.forceRequested ? state.waiters : []
            if state.forceRequested {
                state.forcedAt = now
                state.forceRequested = false
                state.waiters = []
            }
            return (recovered, waiters)
        }
        refreshCount.add(1, ordering: .relaxed)
        for waiter in waiters { waiter(token) }
        return .signed(recovered: recovered)
    }

    /// What to do after APNs answered ExpiredProviderToken.
    public enum AfterExpiry: Equatable, Sendable {
        /// A newer token is in force already (another push's answer replaced it): retry with it.
        case retry(String)
        /// A new token is being signed; `whenSigned` gets it (nil if the key could not sign), on the signing thread.
        case signing
        /// A refresh after ExpiredProviderToken was already made within ``minimumInterval``: a retry with the same
        /// token would be refused again.
        case refused
    }

    /// APNs answered ExpiredProviderToken to `token`: have it replaced now, unless a concurrent push already did, or
    /// one such refresh was made within ``minimumInterval``.
    public func afterExpiry(of token: String, whenSigned: @escaping @Sendable (String?) -> Void) -> AfterExpiry {
        let now = clock.monotonicNow
        let answer = state.withLock { state -> AfterExpiry in
            if let current = state.current, current.token != token { return .retry(current.token) }
            if state.closed { return .refused }
            if let forcedAt = state.forcedAt, now - forcedAt < Self.minimumInterval { return .refused }
            state.forceRequested = true
            state.waiters.append(whenSigned)
            return .signing
        }
        if answer == .signing { wake.withLock { $0 }?() }
        return answer
    }

    /// No token will be signed any more (the signing thread stops): whoever waits for one is told at once (their
    /// pushes are answered), and a later ExpiredProviderToken is ``AfterExpiry/refused``.
    public func close() {
        let waiters = state.withLock { state in
            state.closed = true
            state.forceRequested = false
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter(nil) }
    }

    /// What tells the signing thread to call ``refreshIfDue()`` now.
    public func onRefreshWanted(_ action: @escaping @Sendable () -> Void) {
        wake.withLock { $0 = action }
    }

    /// True when `other` would sign the same tokens (same public key, key id and team).
    public func signs(like other: ProviderCredentials) -> Bool {
        signer.signsLike(other)
    }
}
