import HTTP2Client
import MonotonicTime
import RelayCore
import Testing

@testable import RelayServer

/// A problem log's lines compare with their words.
private func == (lines: [APNsProblemLog.Line], texts: [String]) -> Bool { lines.map(\.text) == texts }

/// The problem log's rules without a relay: when a line is due, with time passed in.
@Suite("APNsProblemLog")
struct APNsProblemLogUnitTests {
    /// The test clock: `seconds` after its origin.
    static func at(_ seconds: UInt64) -> Instant { Instant(nanoseconds: seconds * 1_000_000_000) }

    @Test func aProblemIsOneLineWhenItStartsAndOneWhenItEnds() {
        var log = APNsProblemLog(environment: "sandbox")
        let refused = HTTP2ClientEvent(.cannotConnect, "Connection refused")
        #expect(log.record(refused, now: 0) == ["apns sandbox: cannot connect to APNs: Connection refused"])
        for attempt in 1...50 { #expect(log.record(refused, now: Self.at(UInt64(attempt))).isEmpty) }
        #expect(
            log.record(HTTP2ClientEvent(.connected), now: Self.at(60)) == [
                "apns sandbox: resolved: cannot connect to APNs (51 times over 60 s)"
            ])
        #expect(!log.hasOngoing)
        #expect(log.record(HTTP2ClientEvent(.connected), now: Self.at(61)).isEmpty)
    }

    @Test func aLastingProblemIsSummarizedNotRepeated() {
        var log = APNsProblemLog(environment: "production", summaryInterval: 600_000_000_000)
        let unknown = HTTP2ClientEvent(.cannotResolve, "Name or service not known")
        #expect(log.record(unknown, now: 0).count == 1)
        #expect(log.record(unknown, now: Self.at(300)).isEmpty)
        #expect(
            log.record(unknown, now: Self.at(600)) == [
                "apns production: still cannot resolve APNs' host name (2 more times in the last 10 min): "
                    + "Name or service not known"
            ])
        #expect(log.record(unknown, now: Self.at(700)).isEmpty)
    }

    @Test func goawayEndsOnlyAfterAnswersFlowWithoutAnotherForTheQuietPeriod() {
        var log = APNsProblemLog(environment: "sandbox", quietPeriod: 30_000_000_000)
        let goaway = HTTP2ClientEvent(.goaway, "Shutdown")
        #expect(log.record(goaway, now: 0) == ["apns sandbox: APNs closes connections with GOAWAY: Shutdown"])
        #expect(log.record(HTTP2ClientEvent(.proven), now: Self.at(1)).isEmpty)
        #expect(log.record(goaway, now: Self.at(2)).isEmpty)
        #expect(log.answered(now: Self.at(20)).isEmpty)
        #expect(
            log.answered(now: Self.at(32)) == [
                "apns sandbox: resolved: APNs closes connections with GOAWAY (2 times over 32 s)"
            ])
    }

    @Test func aRejectedTokenEndsWithTheFirstAnswerThatProvesIt() {
        var log = APNsProblemLog(environment: "sandbox")
        #expect(log.providerTokenRejected("InvalidProviderToken: check APNS_KEY_SANDBOX", now: 0).count == 1)
        #expect(log.providerTokenRejected("InvalidProviderToken: check APNS_KEY_SANDBOX", now: Self.at(1)).isEmpty)
        #expect(
            log.answered(now: Self.at(2)) == [
                "apns sandbox: resolved: APNs rejects the provider token (2 times over 2 s)"
            ])
    }
}

extension APNsProblemLogUnitTests {
    /// Every way a proxy gives no tunnel is one problem: one line naming the proxy and its answer, one when a
    /// connection works again.
    @Test func aProxyThatGivesNoTunnelIsOneLineUntilAConnectionWorks() {
        var log = APNsProblemLog(environment: "production")
        let refused = HTTP2ClientEvent(
            .proxyRefused, "proxy 127.0.0.1:3128 refused the tunnel: 407 Proxy Authentication Required")
        #expect(
            log.record(refused, now: 0) == [
                "apns production: the egress proxy gives no tunnel to APNs: proxy 127.0.0.1:3128 refused the tunnel: "
                    + "407 Proxy Authentication Required"
            ])
        for kind in HTTP2ClientEvent.Kind.proxyKinds {
            // Every kind, in the words of the first: the same cause again, never a line per push.
            #expect(log.record(HTTP2ClientEvent(kind, refused.detail), now: Self.at(1)).isEmpty)
        }
        #expect(
            log.record(HTTP2ClientEvent(.connected), now: Self.at(30)) == [
                "apns production: resolved: the egress proxy gives no tunnel to APNs (6 times over 30 s)"
            ])
    }

    /// A lasting problem whose cause changes gets one line naming the new cause (and the one it replaces), once per
    /// change; the same cause again is no line, and its end is one line.
    @Test func aProxyWhoseAnswerChangesGetsOneLinePerChange() {
        var log = APNsProblemLog(environment: "sandbox")
        let forbidden = HTTP2ClientEvent(.proxyRefused, "proxy 127.0.0.1:3128 refused the tunnel: 403 Forbidden")
        let authenticate = HTTP2ClientEvent(
            .proxyRefused, "proxy 127.0.0.1:3128 refused the tunnel: 407 Proxy Authentication Required")
        #expect(log.record(forbidden, now: 0).map(\.kind) == [.started])
        #expect(log.record(forbidden, now: Self.at(1)).isEmpty)
        let changed = log.record(authenticate, now: Self.at(2))
        #expect(
            changed == [
                "apns sandbox: the egress proxy gives no tunnel to APNs: proxy 127.0.0.1:3128 refused the tunnel: "
                    + "407 Proxy Authentication Required (the cause changed; before: proxy 127.0.0.1:3128 refused "
                    + "the tunnel: 403 Forbidden)"
            ])
        #expect(changed.map(\.kind) == [.causeChanged] && changed.allSatisfy(\.isWarning))
        for second in 3..<50 { #expect(log.record(authenticate, now: Self.at(UInt64(second))).isEmpty) }
        #expect(log.record(forbidden, now: Self.at(50)).count == 1, "back to 403: another change, another line")
        let resolved = log.record(HTTP2ClientEvent(.connected), now: Self.at(60))
        #expect(
            resolved == ["apns sandbox: resolved: the egress proxy gives no tunnel to APNs (51 times over 60 s)"])
        #expect(resolved.map(\.kind) == [.resolved] && !resolved[0].isWarning)
    }

    /// Opening a connection fails at one step at a time: refused, then (APNs reached) its certificate not trusted is
    /// the same problem with a new cause, one line; a connection that works ends it with one line.
    @Test func aConnectionProblemThatMovesToAnotherStepIsOneProblemWithANewCause() {
        var log = APNsProblemLog(environment: "production")
        let refused = HTTP2ClientEvent(.cannotConnect, "Connection refused")
        let untrusted = HTTP2ClientEvent(.tlsVerificationFailed, "certificate verify failed")
        #expect(log.record(refused, now: 0).count == 1)
        #expect(log.record(refused, now: Self.at(5)).isEmpty)
        #expect(
            log.record(untrusted, now: Self.at(10)) == [
                "apns production: APNs' TLS certificate is not trusted: certificate verify failed (the cause "
                    + "changed; before: cannot connect to APNs: Connection refused)"
            ])
        #expect(log.record(untrusted, now: Self.at(11)).isEmpty)
        #expect(log.ongoing.count == 1)
        // Another kind of problem is its own: GOAWAY on a working connection is not a change of this one's cause.
        #expect(log.record(HTTP2ClientEvent(.goaway, "Shutdown"), now: Self.at(12)).map(\.kind) == [.started])
        #expect(
            log.record(HTTP2ClientEvent(.connected), now: Self.at(20)) == [
                "apns production: resolved: APNs' TLS certificate is not trusted (4 times over 20 s)"
            ])
    }

    /// The summary of a lasting problem counts from its last line, a change of cause included.
    @Test func aSummaryAfterAChangeCountsFromTheChange() {
        var log = APNsProblemLog(environment: "sandbox", summaryInterval: 600_000_000_000)
        let timeout = HTTP2ClientEvent(.cannotConnect, "connect timed out")
        let refused = HTTP2ClientEvent(.cannotConnect, "Connection refused")
        #expect(log.record(timeout, now: 0).count == 1)
        #expect(log.record(refused, now: Self.at(300)).count == 1)
        #expect(log.record(refused, now: Self.at(600)).isEmpty)
        #expect(
            log.record(refused, now: Self.at(900)) == [
                "apns sandbox: still cannot connect to APNs (2 more times in the last 10 min): Connection refused"
            ])
    }

    @Test func theProxyFailuresAreCountedByKind() {
        let reporter = APNsProblemReporter(environment: "sandbox", clock: SystemClock())
        reporter.record(HTTP2ClientEvent(.proxyRefused, "proxy 127.0.0.1:1 refused the tunnel: 403 Forbidden"))
        reporter.record(HTTP2ClientEvent(.proxyRefused, "proxy 127.0.0.1:1 refused the tunnel: 403 Forbidden"))
        reporter.record(HTTP2ClientEvent(.proxyTimeout, "proxy 127.0.0.1:1 did not answer CONNECT in time"))
        reporter.record(HTTP2ClientEvent(.cannotConnect, "Connection refused"))
        let counts = reporter.tunnelFailureCounts
        #expect(counts.map(\.kind) == ["unreachable", "refused", "malformed", "timeout", "closed"])
        #expect(counts.map(\.count) == [0, 2, 0, 1, 0])
    }
}
