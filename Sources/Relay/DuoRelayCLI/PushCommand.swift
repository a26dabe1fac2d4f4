import DuoRelayClient
import Foundation
import MonotonicTime
import PushClient
import RelayCore
import RelayCrypto
import RelayVersion

/// `duo-relay push`: an operator's end-to-end check. Sends one push with random `sealed`, `id`
/// and `thread` through a relay, as a channel would, and says what became of it. The app's extension cannot
/// open the random content, so the phone may show the placeholder alert.
///
/// The request goes over the project's own client connection (PushClient: OutboundConnections over OpenSSL, the
/// client the relay trusts APNs and Redis with), not URLSession: FoundationNetworking on Linux has no way to add a CA
/// (no option, no server-trust challenge; libcurl is given the system bundle), and its errors cannot say whether
/// a request was written before a time-out. The answer is read as DuoRelayClient reads it
/// (``RelayAnswer``, ``PushOutcome``), so what this prints is what a channel is told.
enum PushCommand {
    static let help = """
        usage: duo-relay push --relay URL --grant GRANT [--ca-file FILE] [--timeout SECONDS]

        Sends one push with random sealed, id and thread through the relay at URL, as a channel
        would, and prints what became of it, with the relay's HTTP status and the time it took
        ("push: delivered, apns-id ... (HTTP 200, 35 ms)"). Exit 0 when APNs accepted it, 1 otherwise.

          --relay URL            the relay's base URL, for example https://relay.example
          --grant GRANT          a grant from POST /v1/grant; "-" reads it from standard input
                                 (keeps it out of the process list and shell history)
          --ca-file FILE         PEM CA certificates trusted beside the system's roots, for a relay
                                 behind a TLS front whose certificate a private CA issued (https only)
          --timeout SECONDS      the call's deadline (default 15)

        A failure before the request was written says where it happened (the relay's certificate
        not trusted, the TLS handshake, no connection, the deadline) and that the push never reached
        the relay: sending it again cannot duplicate it. A 502 apns whose detail says APNs refused the
        push or was never reached says it was not delivered. Once the request is written, a failure
        (the deadline, the connection lost) or an answer that leaves the outcome open (a 502 sent to
        APNs without an answer, another 5xx) says the push may or may not have been delivered.
        """

    /// Where to send the request, read from `--relay` and `--ca-file`.
    struct Target {
        var host: String
        var port: UInt16
        var path: String
        var https: Bool
        var caFile: String?

        /// `host[:port]` as the `Host` field and messages write it (an IPv6 address in brackets).
        var authority: String {
            let name = host.contains(":") ? "[\(host)]" : host
            return port == (https ? 443 : 80) ? name : "\(name):\(port)"
        }

        init(relay text: String, caFile: String?) throws(UsageError) {
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
                ["http", "https"].contains(scheme),
                let host = url.host, !host.isEmpty
            else { throw UsageError(problem: "--relay must be an http:// or https:// URL") }
            https = scheme == "https"
            if caFile != nil && !https {
                throw UsageError(problem: "--ca-file is for an https:// relay; --relay is http://")
            }
            guard url.user == nil, url.password == nil, url.query == nil, url.fragment == nil else {
                throw UsageError(problem: "--relay takes the relay's base URL, without user, query or fragment")
            }
            self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
            guard let port = UInt16(exactly: url.port ?? (https ? 443 : 80)), port > 0 else {
                throw UsageError(problem: "--relay has a port out of range")
            }
            self.port = port
            // The push endpoint below the base URL, as RelayClient posts it.
            var base = url.path
            while base.hasSuffix("/") { base.removeLast() }
            path = base + "/v1/push"
            self.caFile = caFile
        }
    }

    static func run(_ arguments: [String]) -> Int32 {
        if arguments.contains("--help") {
            Output.standard(help)
            return 0
        }
        let target: Target
        var grant: String
        let timeoutMilliseconds: UInt64
        do throws(UsageError) {
            try Usage.check(arguments, allowed: ["--relay", "--grant", "--timeout", "--ca-file"])
            guard let relayText = try Usage.option("--relay", in: arguments),
                let grantText = try Usage.option("--grant", in: arguments)
            else { throw UsageError(problem: "push needs --relay URL and --grant GRANT") }
            target = try Target(relay: relayText, caFile: try Usage.option("--ca-file", in: arguments))
            grant = grantText
            let seconds = try Usage.option("--timeout", in: arguments).map { Double($0) } ?? 15
            guard let seconds, seconds > 0, seconds <= 600 else {
                throw UsageError(problem: "--timeout must be 0 to 600 seconds")
            }
            timeoutMilliseconds = UInt64(seconds * 1000)
        } catch {
            return Usage.fail(error.problem)
        }
        var transport = PushTransport.plain
        if target.https {
            do {
                transport = try .tls(serverName: target.host, extraCAFile: target.caFile)
            } catch {
                Output.error("duo-relay push: --ca-file: \(error.reason) (PEM certificates)")
                return 1
            }
        }
        if grant == "-" {
            grant = (readLine(strippingNewline: true) ?? "").trimmingCharacters(in: .whitespaces)
        }
        let push = RelayPush(
            sealed: Data(SecureRandom.bytes(count: RelayPush.sealedByteCount)), id: randomHex(), thread: randomHex())
        let request = PushRequest.bytes(
            path: target.path, authority: target.authority, userAgent: "duo-relay/\(RelayVersion.release)",
            body: push.body(grant: grant))
        let started = ContinuousClock.now
        let result: PushExchange.Result
        do {
            result = try PushConnection.exchange(
                host: target.host, port: target.port, transport: transport, request: request,
                timeoutMilliseconds: timeoutMilliseconds)
        } catch {
            Output.error("duo-relay push: \(error.reason)")
            return 1
        }
        let elapsed = ContinuousClock.now - started
        let milliseconds = elapsed.nanoseconds / 1_000_000
        switch result {
        case .answered(let answer):
            let outcome = PushOutcome(answer)
            Output.standard(
                "push: " + describe(outcome, answer: answer) + " (HTTP \(answer.status), \(milliseconds) ms)")
            if case .delivered = outcome { return 0 }
        case .failed(let failure):
            Output.standard(
                "push: " + describe(failure, target: target) + " (no HTTP answer, \(milliseconds) ms)")
        }
        return 1
    }

    /// Where a push without an answer failed, and whether the relay may have it; never the grant.
    static func describe(_ failure: PushExchange.Failure, target: Target) -> String {
        let never = "; the push never reached the relay"
        let open = "; the relay may have the push, so it may or may not have been delivered"
        switch failure {
        case .certificateNotTrusted(let reason):
            let hint =
                target.caFile == nil
                ? " (a relay behind a private CA: give its CA with --ca-file)" : " (nor by --ca-file)"
            return "refused by TLS: the certificate of \(target.authority) is not trusted: \(reason)\(hint)" + never
        case .handshake(let reason):
            return "refused by TLS: no TLS session with \(target.authority): \(reason)" + never
        case .noConnection(let reason):
            return "no connection to \(target.authority): \(reason)" + never
        case .timedOutConnecting:
            return "timed out before a connection to \(target.authority) was made" + never
        case .timedOutAwaitingAnswer:
            return "timed out waiting for the answer of \(target.authority)" + open
        case .connectionLost(let reason):
            return "the connection to \(target.authority) ended before an answer: \(reason)" + open
        case .malformedAnswer(let reason):
            return "\(target.authority) answered something other than HTTP: \(reason)" + open
        }
    }

    /// What an operator reads of `answer`: for a 502 `apns`, what its detail says became of the push (APNs
    /// refused it or was never reached: not delivered; sent without an answer, or a relay that does not say:
    /// it may or may not have been); never the grant, `id` or `thread`.
    static func describe(_ outcome: PushOutcome, answer: RelayAnswer) -> String {
        guard answer.status == 502, answer.error == "apns", let detail = answer.detail, !detail.isEmpty else {
            return describe(outcome)
        }
        // The relay's fixed sentences are "what happened: what it means"; the first half says it here.
        let happened = detail.range(of: ": ", options: .backwards).map { String(detail[..<$0.lowerBound]) } ?? detail
        if RelayError.notDeliveredDetailPrefixes.contains(where: detail.hasPrefix) {
            return "not delivered: " + happened
        }
        return "no definite answer: " + detail
    }

    /// What an operator reads; never the grant, `id` or `thread`.
    static func describe(_ outcome: PushOutcome) -> String {
        switch outcome {
        case .delivered(let apnsID): "delivered, apns-id \(apnsID ?? "not given")"
        case .dropRegistration: "APNs will never deliver to this device token (410 unregistered)"
        case .renewGrant(let expired):
            expired ? "the grant has expired (401 grant_expired)" : "the grant does not open here (401 grant_invalid)"
        case .retry(let after, let reason):
            "refused for now (\(reason == .overloaded ? "overloaded" : "limit: \(reason)")); retry after "
                + (after.map { "\($0.components.seconds) s" } ?? "a while")
        case .failed(let maybe):
            maybe
                ? "no definite answer: the push may or may not have been delivered"
                : "no definite answer: the push was not delivered"
        case .rejected(let detail): "rejected: \(detail)"
        }
    }

    private static func randomHex() -> String {
        SecureRandom.bytes(count: 32).map { String(format: "%02x", $0) }.joined()
    }
}
