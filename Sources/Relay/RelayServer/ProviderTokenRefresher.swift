import Dispatch
import Foundation
import MonotonicTime
import RelayCore
import Synchronization

/// The signing thread of one environment's provider token: it signs the next token when the one in force reaches its
/// refresh age, at once when APNs called a token expired, and again with back-off after a failure, so that no push
/// ever waits for a signature (a key in a network HSM takes tens of milliseconds; one in a token that went away does
/// not answer at all). A failure is said once when it starts and once when it ends (the environment's problem log);
/// meanwhile the token in force serves for as long as it is valid.
final class ProviderTokenRefresher: Sendable {
    private let token: ProviderToken
    private let clock: any RelayClock
    private let problems: APNsProblemReporter
    /// Where the key is, for the problem's line: `key id ABC, in the token at pkcs11:...` or `key id ABC`.
    private let keyDescription: String
    /// The signing thread's name.
    private let name: String
    private let wakeUp = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    /// The longest sleep between two looks at the token: the clock is read again after it.
    static let longestWait: UInt64 = 60 * 1_000_000_000

    init(
        token: ProviderToken, clock: any RelayClock, problems: APNsProblemReporter, keyDescription: String,
        name: String
    ) {
        self.token = token
        self.clock = clock
        self.problems = problems
        self.keyDescription = keyDescription
        self.name = name
        token.onRefreshWanted { [wakeUp] in wakeUp.signal() }
    }

    /// Looks at the token now (a test that moved its clock).
    func wake() {
        wakeUp.signal()
    }

    /// Ends the thread after its current signature, if one is under way; a push waiting for a token after
    /// ExpiredProviderToken is answered at once.
    func stop() {
        stopping.store(true, ordering: .relaxed)
        token.close()
        wakeUp.signal()
    }

    /// Signs the first token now, on the caller's thread (the relay's start or reload, never a worker's loop), so that
    /// the first push finds one ready, then starts the signing thread for the next ones.
    func start() -> ProviderToken.Refresh {
        let outcome = token.refreshIfDue()
        report(outcome)
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
        return outcome
    }

    private func run() {
        while !stopping.load(ordering: .relaxed) {
            report(token.refreshIfDue())
            let next = token.nextRefresh
            let now = clock.monotonicNow
            let wait = min(next - now, Self.longestWait)  // 0 when it is due already
            if wait > 0 { _ = wakeUp.wait(timeout: .now() + .nanoseconds(Int(wait))) }
        }
    }

    private func report(_ outcome: ProviderToken.Refresh) {
        switch outcome {
        case .notDue:
            break
        case .signed:
            problems.signed()
        case .failed(let error, _):
            problems.signingFailed(
                "\(keyDescription): \(error.reason) (the token in force serves until it is "
                    + "\(ProviderToken.validity / 60_000_000_000) minutes old; retrying)")
        }
    }
}
