import Foundation
import MonotonicTime
import Synchronization

/// The relay's sense of time, injected so that expiry, limits and token refresh are tested by
/// advancing a clock rather than by sleeping. The real one is RelayServer's `SystemClock`, on the event loops' clock.
public protocol RelayClock: Sendable {
    /// Wall time, Unix seconds: grant issue and expiry, JWT `iat`, `apns-expiration`.
    var unixSeconds: UInt64 { get }
    /// The monotonic clock (CLOCK_MONOTONIC, as the event loops read it): limiter windows, token ages and push
    /// deadlines, immune to wall-clock steps.
    var monotonicNow: Instant { get }
}

/// A clock that moves only when told to.
public final class ManualClock: RelayClock {
    private let state: Mutex<(unix: UInt64, monotonic: Instant)>

    public init(unixSeconds: UInt64 = 1_790_000_000, monotonicNow: Instant = 1_000_000_000) {
        state = Mutex((unixSeconds, monotonicNow))
    }

    public var unixSeconds: UInt64 { state.withLock { $0.unix } }
    public var monotonicNow: Instant { state.withLock { $0.monotonic } }

    /// Moves both clocks forward.
    public func advance(seconds: Double) {
        state.withLock {
            $0.monotonic += UInt64(seconds * 1e9)
            $0.unix = UInt64(Double($0.unix) + seconds)
        }
    }
}
