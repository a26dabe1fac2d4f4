import Synchronization
import TLS

/// A server's TLS (docs/DESIGN.md, "TLS"): the context each new connection's session is made from, replaced whole by
/// a reload while open connections keep the one they started with, and the handshakes that failed, counted by kind
/// only (never who failed: nothing of a failed handshake is logged).
final class TLSFront: Sendable {
    private let context: Mutex<TLSServerContext>
    private let failures = Mutex<[ServerHandshake.Failure: Int]>([:])

    init(_ context: TLSServerContext) {
        self.context = Mutex(context)
    }

    /// The context for a connection accepted now.
    var current: TLSServerContext {
        context.withLock { $0 }
    }

    /// Connections accepted from now on get `new`.
    func replace(with new: TLSServerContext) {
        context.withLock { $0 = new }
    }

    func count(_ failure: ServerHandshake.Failure) {
        failures.withLock { $0[failure, default: 0] += 1 }
    }

    /// Failed handshakes by kind, every kind present (0 when none failed so).
    var failureCounts: [(kind: String, count: Int)] {
        let counts = failures.withLock { $0 }
        return ServerHandshake.Failure.allCases.map { ($0.rawValue, counts[$0] ?? 0) }
    }
}
