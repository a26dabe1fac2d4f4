import Dispatch
import DuoRelayClient
import Foundation
import RelayCrypto
import Synchronization

/// `duo-relay push`: an operator's end-to-end check. Sends one push with random `sealed`, `id`
/// and `thread` through a relay (with ``RelayClient``, as a channel would) and says what became
/// of it. The app's extension cannot open the random content, so the phone may show the
/// placeholder alert.
enum PushCommand {
    static let help = """
        usage: duo-relay push --relay URL --grant GRANT [--timeout SECONDS]

        Sends one push with random sealed, id and thread through the relay at URL, as a channel
        would, and prints what became of it, with the relay's HTTP status and the time it took
        ("push: delivered, apns-id ... (HTTP 200, 35 ms)"). Exit 0 when APNs accepted it, 1 otherwise.

          --relay URL            the relay's base URL, for example https://relay.example
          --grant GRANT          a grant from POST /v1/grant; "-" reads it from standard input
                                 (keeps it out of the process list and shell history)
          --timeout SECONDS      the call's deadline (default 15)
        """

    static func run(_ arguments: [String]) -> Int32 {
        if arguments.contains("--help") {
            Output.standard(help)
            return 0
        }
        let relay: URL
        var grant: String
        let timeout: Duration
        do throws(UsageError) {
            try Usage.check(arguments, allowed: ["--relay", "--grant", "--timeout"])
            guard let relayText = try Usage.option("--relay", in: arguments),
                let grantText = try Usage.option("--grant", in: arguments)
            else { throw UsageError(problem: "push needs --relay URL and --grant GRANT") }
            guard let url = URL(string: relayText), ["http", "https"].contains(url.scheme ?? ""), url.host != nil
            else { throw UsageError(problem: "--relay must be an http:// or https:// URL") }
            relay = url
            grant = grantText
            let seconds = try Usage.option("--timeout", in: arguments).map { Double($0) } ?? 15
            guard let seconds, seconds > 0, seconds <= 600 else {
                throw UsageError(problem: "--timeout must be 0 to 600 seconds")
            }
            timeout = .milliseconds(Int64(seconds * 1000))
        } catch {
            return Usage.fail(error.problem)
        }
        if grant == "-" {
            grant = (readLine(strippingNewline: true) ?? "").trimmingCharacters(in: .whitespaces)
        }
        let push = RelayPush(
            sealed: Data(SecureRandom.bytes(count: RelayPush.sealedByteCount)), id: randomHex(), thread: randomHex())
        let client = RelayClient(relay: relay, timeout: timeout, maxConnections: 1)
        let (outcome, answer, elapsed) = wait { [grant] in
            let started = ContinuousClock.now
            let (outcome, answer) = await client.pushAnswered(push, grant: grant)
            let elapsed = ContinuousClock.now - started
            // Before the process exits: a URLSession still being torn down during exit was reported as leaking.
            await client.close()
            return (outcome, answer, elapsed)
        }
        let milliseconds = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        let status = answer.map { "HTTP \($0.status)" } ?? "no HTTP answer"
        Output.standard("push: " + describe(outcome) + " (\(status), \(milliseconds) ms)")
        if case .delivered = outcome { return 0 }
        return 1
    }

    /// What an operator reads; never the grant, `id` or `thread`.
    static func describe(_ outcome: PushOutcome) -> String {
        switch outcome {
        case .delivered(let apnsID): "delivered, apns-id \(apnsID ?? "not given")"
        case .dropRegistration: "APNs will never deliver to this device token (410 unregistered)"
        case .renewGrant(let expired):
            expired ? "the grant has expired (401 grant_expired)" : "the grant does not open here (401 grant_invalid)"
        case .retry(let after, let reason):
            "refused for now (\(reason)); retry after \(after.map { "\($0.components.seconds) s" } ?? "a while")"
        case .failed(let maybe):
            maybe ? "no definite answer: APNs may or may not have it" : "could not reach the relay"
        case .rejected(let detail): "rejected: \(detail)"
        }
    }

    private static func randomHex() -> String {
        SecureRandom.bytes(count: 32).map { String(format: "%02x", $0) }.joined()
    }

    /// Runs `body` on the concurrency pool and blocks this (main) thread until it returns.
    private static func wait(
        _ body: @escaping @Sendable () async -> (PushOutcome, RelayAnswer?, Duration)
    ) -> (PushOutcome, RelayAnswer?, Duration) {
        let result = Mutex<(PushOutcome, RelayAnswer?, Duration)?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let outcome = await body()
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        return result.withLock { $0 } ?? (.failed(mayHaveBeenDelivered: true), nil, .zero)
    }
}
