import HTTP2Client
import MonotonicTime
import RelayCore
import Testing

@testable import RelayServer

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
            #expect(log.record(HTTP2ClientEvent(kind, "proxy 127.0.0.1:3128 ..."), now: Self.at(1)).isEmpty)
        }
        #expect(
            log.record(HTTP2ClientEvent(.connected), now: Self.at(30)) == [
                "apns production: resolved: the egress proxy gives no tunnel to APNs (6 times over 30 s)"
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
