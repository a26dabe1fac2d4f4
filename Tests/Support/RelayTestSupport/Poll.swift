import Foundation
import MonotonicTime

/// Bounded waiting on a condition a test can observe (a line printed, a delivery recorded, a port
/// announced), in place of a fixed sleep: it returns as soon as the condition holds, and gives up at a
/// deadline so a broken build fails instead of hanging.
public enum Poll {
    /// Checks `condition` every `interval` until it holds or `timeout` has passed; whether it held. The
    /// condition is checked once more after the deadline, so a slow last step still counts.
    @discardableResult
    public static func until(
        within timeout: Duration, every interval: Duration = .milliseconds(20), _ condition: () throws -> Bool
    ) rethrows -> Bool {
        try value(within: timeout, every: interval) { try condition() ? true : nil } ?? false
    }

    /// Waits like ``until(within:every:_:)`` and throws a ``TestFailure`` naming `what` if it did not happen.
    public static func wait(
        for what: String, within timeout: Duration, every interval: Duration = .milliseconds(20),
        _ condition: () throws -> Bool
    ) throws {
        guard try until(within: timeout, every: interval, condition) else {
            throw TestFailure("\(what): not within \(timeout)")
        }
    }

    /// The first non-nil value `produce` returns within `timeout`, checked every `interval`; nil if none.
    public static func value<Value>(
        within timeout: Duration, every interval: Duration = .milliseconds(20), _ produce: () throws -> Value?
    ) rethrows -> Value? {
        let deadline = ContinuousClock.now + timeout
        while true {
            let expired = ContinuousClock.now >= deadline
            if let value = try produce() { return value }
            if expired { return nil }
            // A deliberate pace: what is waited for is another process's or thread's doing, seen only by looking.
            Thread.sleep(forTimeInterval: interval.seconds)
        }
    }

    /// ``until(within:every:_:)`` for async tests: it sleeps with `Task.sleep`, so it never holds a thread of
    /// the cooperative pool (a blocked thread there starves the other async tests).
    @discardableResult
    public static func suspendUntil(
        within timeout: Duration, every interval: Duration = .milliseconds(20),
        _ condition: () async throws -> Bool
    ) async rethrows -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            let expired = ContinuousClock.now >= deadline
            if try await condition() { return true }
            if expired { return false }
            try? await Task.sleep(for: interval)
        }
    }
}

extension Duration {
    /// The duration in seconds, for the APIs that take a `TimeInterval`.
    var seconds: Double {
        Double(nanoseconds) / 1e9
    }
}
