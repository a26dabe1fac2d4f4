import HTTP2Client
import MonotonicTime
import RelayCore
import Synchronization

/// Prints an ``APNsProblemLog``'s lines for one environment; shared by the gateway and its HTTP/2
/// client's event callback.
final class APNsProblemReporter: Sendable {
    private let log: Mutex<APNsProblemLog>
    private let environment: String
    /// A problem is ongoing (read on every answer without taking the lock).
    private let ongoing = Atomic<Bool>(false)
    private let clock: any RelayClock
    /// Tunnels the egress proxy did not give, by how (the event kinds of ``HTTP2ClientEvent/Kind/proxyKinds``).
    private let tunnelFailures = Mutex<[HTTP2ClientEvent.Kind: Int]>([:])

    init(environment: String, clock: any RelayClock) {
        log = Mutex(APNsProblemLog(environment: environment))
        self.environment = environment
        self.clock = clock
    }

    func record(_ event: HTTP2ClientEvent) {
        if HTTP2ClientEvent.Kind.proxyKinds.contains(event.kind) {
            tunnelFailures.withLock { $0[event.kind, default: 0] += 1 }
        }
        apply { $0.record(event, now: clock.monotonicNow) }
    }

    /// Tunnels the proxy did not give, by kind (`unreachable`, `refused`, `malformed`, `timeout`, `closed`), every
    /// kind listed.
    var tunnelFailureCounts: [(kind: String, count: Int)] {
        let counts = tunnelFailures.withLock { $0 }
        return HTTP2ClientEvent.Kind.proxyKinds.map { kind in
            (Self.label(kind), counts[kind] ?? 0)
        }
    }

    /// The metric's label for a proxy event kind: `proxyRefused` is `refused`.
    static func label(_ kind: HTTP2ClientEvent.Kind) -> String {
        let name = kind.description
        guard name.hasPrefix("proxy") else { return name }
        return name.dropFirst("proxy".count).lowercased()
    }

    func providerTokenRejected(_ detail: String) {
        apply { $0.providerTokenRejected(detail, now: clock.monotonicNow) }
    }

    func signingFailed(_ detail: String) {
        apply { $0.signingFailed(detail, now: clock.monotonicNow) }
    }

    func signed() {
        guard ongoing.load(ordering: .relaxed) else { return }
        apply { $0.signed(now: clock.monotonicNow) }
    }

    /// Called on every answer that proves the token: costs one atomic load unless a problem is ongoing.
    func answered() {
        guard ongoing.load(ordering: .relaxed) else { return }
        apply { $0.answered(now: clock.monotonicNow) }
    }

    /// Applies `change` and prints its lines after unlocking.
    private func apply(_ change: (inout APNsProblemLog) -> [APNsProblemLog.Line]) {
        let lines = log.withLock { log -> [APNsProblemLog.Line] in
            let lines = change(&log)
            ongoing.store(log.hasOngoing, ordering: .relaxed)
            return lines
        }
        for line in lines {
            Log.line(
                line.text, level: line.isWarning ? .warning : .info, event: line.kind.rawValue,
                fields: ["environment": environment, "problem": line.problem.event])
        }
    }
}
