import RelayCore
import Testing

@testable import RelayServer

/// What the metrics say of readiness (docs/DESIGN.md, "Readiness"): `duo_relay_ready` is the instance's, and each APNs
/// environment's state is a gauge of its own, one series per state, so an alert can select `state="failing"`.
@Suite struct ReadinessMetricsTests {
    @Test func aFailingEnvironmentIsItsOwnGaugeAndLeavesTheInstanceReady() {
        let text = MetricsEndpoint.readiness(
            RelayHTTPHandler.Readiness(
                ready: true, draining: false, environments: [(.sandbox, .failing), (.production, .ready)],
                limits: "memory"))
        let samples = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(
            samples == [
                "duo_relay_ready 1",
                #"duo_relay_apns_environment_state{environment="sandbox",state="idle"} 0"#,
                #"duo_relay_apns_environment_state{environment="sandbox",state="ready"} 0"#,
                #"duo_relay_apns_environment_state{environment="sandbox",state="failing"} 1"#,
                #"duo_relay_apns_environment_state{environment="production",state="idle"} 0"#,
                #"duo_relay_apns_environment_state{environment="production",state="ready"} 1"#,
                #"duo_relay_apns_environment_state{environment="production",state="failing"} 0"#,
            ])
        #expect(text.contains("# TYPE duo_relay_ready gauge\n"))
        #expect(text.contains("# TYPE duo_relay_apns_environment_state gauge\n"))
        #expect(text.contains("(APNs' state does not count)"))
    }

    @Test func anInstanceNotReadyReadsZero() {
        let text = MetricsEndpoint.readiness(
            RelayHTTPHandler.Readiness(
                ready: false, draining: true, environments: [(.sandbox, .ready)], limits: "memory"))
        #expect(text.contains("\nduo_relay_ready 0\n"))
    }
}
