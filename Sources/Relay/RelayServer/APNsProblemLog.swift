import HTTP2Client
import MonotonicTime

/// What an operator is told about one APNs environment's connections (docs/DESIGN.md, "Lifecycle"):
/// one line when a problem starts and one when it ends, never per push, never an identifier.
/// Repeats while a problem lasts are counted and summarized every ``summaryInterval``. When the cause of a
/// lasting problem changes (the proxy answered 403 and now answers 407; APNs refused connections and now its
/// certificate is not trusted), one line names the new cause: the start line alone would send the person on
/// call after a cause that is gone. Opening a connection fails at one step at a time, so the problems of those
/// steps are one problem whose cause is the latest failure; the others (GOAWAY, PING, the provider token)
/// are each their own.
///
/// Pure: it takes events and the time, and returns the lines to print.
struct APNsProblemLog: Sendable {
    enum Problem: Int, Sendable, CaseIterable {
        case resolve, connect, tlsVerification, tls, alpn, goaway, ping, providerToken, proxy, signing

        /// The start line's words.
        var summary: String {
            switch self {
            case .resolve: "cannot resolve APNs' host name"
            case .connect: "cannot connect to APNs"
            case .tlsVerification: "APNs' TLS certificate is not trusted"
            case .tls: "the TLS handshake with APNs fails"
            case .alpn: "APNs does not agree to HTTP/2 (ALPN h2)"
            case .goaway: "APNs closes connections with GOAWAY"
            case .ping: "an idle APNs connection did not answer PING and was replaced"
            case .providerToken: "APNs rejects the provider token"
            case .proxy: "the egress proxy gives no tunnel to APNs"
            case .signing: "the APNs key cannot sign a provider token"
            }
        }

        /// Problems that a working connection ends: the steps of opening one, of which the latest failure is the
        /// cause (one problem, whose cause changes from step to step).
        var endsWhenConnected: Bool { [.resolve, .connect, .tlsVerification, .tls, .alpn, .proxy].contains(self) }

        /// The problem's name in a JSON log line's fields.
        var event: String {
            switch self {
            case .resolve: "resolve"
            case .connect: "connect"
            case .tlsVerification: "tls_verification"
            case .tls: "tls"
            case .alpn: "alpn"
            case .goaway: "goaway"
            case .ping: "ping"
            case .providerToken: "provider_token"
            case .proxy: "proxy"
            case .signing: "signing"
            }
        }

        /// Problems of connections that worked: over once answers flow and the problem has not come
        /// back for ``APNsProblemLog/quietPeriod`` (GOAWAY is normal now and then; a poisonous push
        /// draws one per try, which is one episode, not many).
        var endsWhenQuiet: Bool { [.goaway, .ping].contains(self) }
    }

    /// One line to print: its words, its kind (a JSON log's event) and the problem it is about.
    struct Line: Sendable, Equatable, CustomStringConvertible {
        enum Kind: String, Sendable {
            /// A problem starts.
            case started = "apns_problem"
            /// A lasting problem's cause changed.
            case causeChanged = "apns_problem_cause"
            /// A lasting problem's repeats.
            case ongoing = "apns_problem_ongoing"
            /// A problem is over.
            case resolved = "apns_problem_resolved"
        }

        var kind: Kind
        var problem: Problem
        var text: String
        var description: String { text }
        /// Problems are warnings; their end is news.
        var isWarning: Bool { kind != .resolved }
    }

    struct Ongoing: Sendable, Equatable {
        var detail: String
        var since: Instant
        var last: Instant
        var count = 1
        var countAtSummary = 1
        var lastSummary: Instant
    }

    let environment: String
    /// A lasting problem is summarized this often (nanoseconds).
    let summaryInterval: UInt64
    /// How long GOAWAY or PING problems must stay away to be over (nanoseconds).
    let quietPeriod: UInt64
    private(set) var ongoing: [Problem: Ongoing] = [:]

    init(environment: String, summaryInterval: UInt64 = 600_000_000_000, quietPeriod: UInt64 = 30_000_000_000) {
        self.environment = environment
        self.summaryInterval = summaryInterval
        self.quietPeriod = quietPeriod
    }

    /// The lines for a client event at `now`.
    mutating func record(_ event: HTTP2ClientEvent, now: Instant) -> [Line] {
        switch event.kind {
        case .cannotResolve: return start(.resolve, event.detail, now: now)
        case .cannotConnect: return start(.connect, event.detail, now: now)
        case .tlsVerificationFailed: return start(.tlsVerification, event.detail, now: now)
        case .tlsFailed: return start(.tls, event.detail, now: now)
        case .alpnRefused: return start(.alpn, event.detail, now: now)
        case .goaway: return start(.goaway, event.detail, now: now)
        case .pingUnanswered: return start(.ping, "", now: now)
        case .proxyUnreachable, .proxyRefused, .proxyMalformed, .proxyTimeout, .proxyClosed:
            return start(.proxy, event.detail, now: now)
        case .connected: return end(Problem.allCases.filter(\.endsWhenConnected), now: now)
        case .proven: return answered(now: now)
        default: return []
        }
    }

    /// APNs answered 403 InvalidProviderToken (`detail`: what to check).
    mutating func providerTokenRejected(_ detail: String, now: Instant) -> [Line] {
        start(.providerToken, detail, now: now)
    }

    /// The key could not sign a new provider token (`detail`: where the key is and why); the token in force serves
    /// while it is valid, and the signing is retried.
    mutating func signingFailed(_ detail: String, now: Instant) -> [Line] {
        start(.signing, detail, now: now)
    }

    /// The key signed a provider token: a signing problem is over.
    mutating func signed(now: Instant) -> [Line] {
        end([.signing], now: now)
    }

    /// APNs answered something that proves the token: the token is accepted, and connection
    /// problems that have been quiet long enough are over.
    mutating func answered(now: Instant) -> [Line] {
        let quiet = ongoing.filter { $0.key.endsWhenQuiet && now - $0.value.last >= quietPeriod }.keys
        return end([.providerToken] + Problem.allCases.filter { quiet.contains($0) }, now: now)
    }

    var hasOngoing: Bool { !ongoing.isEmpty }

    private mutating func start(_ problem: Problem, _ detail: String, now: Instant) -> [Line] {
        let words = "apns \(environment): \(problem.summary)" + (detail.isEmpty ? "" : ": \(detail)")
        if problem.endsWhenConnected,
            let (before, earlier) = ongoing.first(where: { $0.key.endsWhenConnected && $0.key != problem })
        {
            // Another step of opening a connection fails now: the same problem, with a new cause.
            ongoing[before] = nil
            var current = earlier
            current.count += 1
            current.last = now
            current.detail = detail
            current.lastSummary = now
            current.countAtSummary = current.count
            ongoing[problem] = current
            return [changed(to: problem, words, from: before, earlier.detail)]
        }
        guard var current = ongoing[problem] else {
            ongoing[problem] = Ongoing(detail: detail, since: now, last: now, lastSummary: now)
            return [Line(kind: .started, problem: problem, text: words)]
        }
        current.count += 1
        current.last = now
        var lines: [Line] = []
        if detail != current.detail {
            lines.append(changed(to: problem, words, from: problem, current.detail))
            // The line just printed says what holds now; the next summary counts from here.
            current.lastSummary = now
            current.countAtSummary = current.count
        }
        if now - current.lastSummary >= summaryInterval {
            let repeats = current.count - current.countAtSummary
            lines.append(
                Line(
                    kind: .ongoing, problem: problem,
                    text: "apns \(environment): still \(problem.summary) (\(repeats) more times in the last "
                        + "\(Self.seconds(now - current.lastSummary)))" + (detail.isEmpty ? "" : ": \(detail)")))
            current.lastSummary = now
            current.countAtSummary = current.count
        }
        current.detail = detail
        ongoing[problem] = current
        return lines
    }

    private mutating func end(_ problems: [Problem], now: Instant) -> [Line] {
        var lines: [Line] = []
        for problem in problems {
            guard let current = ongoing.removeValue(forKey: problem) else { continue }
            let times = current.count == 1 ? "once" : "\(current.count) times"
            lines.append(
                Line(
                    kind: .resolved, problem: problem,
                    text: "apns \(environment): resolved: \(problem.summary) (\(times) over "
                        + "\(Self.seconds(now - current.since)))"))
        }
        return lines
    }

    /// The line for a lasting problem whose cause is now `words`; `before` and `detail` name the cause it replaces.
    private func changed(to problem: Problem, _ words: String, from before: Problem, _ detail: String) -> Line {
        let earlier = before == problem ? detail : before.summary + (detail.isEmpty ? "" : ": \(detail)")
        return Line(
            kind: .causeChanged, problem: problem, text: words + " (the cause changed; before: \(earlier))")
    }

    private static func seconds(_ nanoseconds: UInt64) -> String {
        let seconds = nanoseconds / 1_000_000_000
        return seconds < 120 ? "\(seconds) s" : "\(seconds / 60) min"
    }
}
