import Dispatch
import Synchronization

/// Events recorded on any thread (a delegate's callbacks, a client's `onEvent`, a pipeline's events) and waited
/// for with a deadline, never a sleep: each record wakes the waiter, which looks again.
public final class Recorder<Event: Sendable>: Sendable {
    private let events = Mutex<[Event]>([])
    private let signal = DispatchSemaphore(value: 0)

    public init() {}

    public func record(_ event: Event) {
        events.withLock { $0.append(event) }
        signal.signal()
    }

    /// Every event recorded so far, in order.
    public var all: [Event] { events.withLock { $0 } }

    /// Waits until `condition` holds for the events recorded, at most `seconds`; returns whether it held.
    @discardableResult
    public func wait(seconds: Double = 10, until condition: ([Event]) -> Bool) -> Bool {
        let deadline = DispatchTime.now() + seconds
        while true {
            if events.withLock({ condition($0) }) { return true }
            if signal.wait(timeout: deadline) == .timedOut { return events.withLock { condition($0) } }
        }
    }
}
