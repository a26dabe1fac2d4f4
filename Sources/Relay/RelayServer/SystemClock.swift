import EventLoops
import Foundation
import MonotonicTime
import RelayCore

/// The real clock: the wall clock, and the event loops' monotonic clock (the process's one reader of it), so that
/// an instant from the relay's handlers and one from a loop's shell compare.
public struct SystemClock: RelayClock {
    public init() {}
    public var unixSeconds: UInt64 { UInt64(max(0, Date().timeIntervalSince1970)) }
    public var monotonicNow: Instant { EventLoop.monotonicNow() }
}
