import Foundation
import Synchronization

/// A settable clock for the simulator's `iat` checks.
final class TestClock: Sendable {
    private let current = Mutex(Date())
    var now: Date { current.withLock { $0 } }
    func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
}
