import Dispatch
import Foundation
import Synchronization

/// The relay's sense of time, injected so that expiry, limits and token refresh are tested by
/// advancing a clock rather than by sleeping.
public protocol RelayClock: Sendable {
    /// Wall time, Unix seconds: grant issue and expiry, JWT `iat`, `apns-expiration`.
    var unixSeconds: UInt64 { get }
    /// Monotonic nanoseconds: limiter windows and token ages, immune to wall-clock steps.
    var uptimeNanoseconds: UInt64 { get }
}

/// The real clock.
public struct SystemClock: RelayClock {
    public init() {}
    public var unixSeconds: UInt64 { UInt64(max(0, Date().timeIntervalSince1970)) }
    public var uptimeNanoseconds: UInt64 { DispatchTime.now().uptimeNanoseconds }
}

/// A clock that moves only when told to.
public final class ManualClock: RelayClock {
    private let state: Mutex<(unix: UInt64, uptime: UInt64)>

    public init(unixSeconds: UInt64 = 1_790_000_000, uptimeNanoseconds: UInt64 = 1_000_000_000) {
        state = Mutex((unixSeconds, uptimeNanoseconds))
    }

    public var unixSeconds: UInt64 { state.withLock { $0.unix } }
    public var uptimeNanoseconds: UInt64 { state.withLock { $0.uptime } }

    /// Moves both clocks forward.
    public func advance(seconds: Double) {
        state.withLock {
            $0.uptime += UInt64(seconds * 1e9)
            $0.unix = UInt64(Double($0.unix) + seconds)
        }
    }
}
