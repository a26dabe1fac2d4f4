import Dispatch
import Testing

@testable import RelayServer

/// Every worker counts in a shard of its own; what operators read is every shard added up.
@Suite struct MetricsTests {
    /// 18 workers (more than there are shards, so some share one) count at once, each on a thread of its own.
    @Test func everyWorkersCountsAreAddedUp() {
        let metrics = Metrics()
        DispatchQueue.concurrentPerform(iterations: 18) { worker in
            for _ in 0..<100 {
                metrics.request(endpoint: "push", outcome: "ok", worker: worker)
                metrics.limited("phone", worker: worker)
                metrics.grantOpened(keyID: 7, worker: worker)
                metrics.apnsAnswer(
                    environment: "sandbox", status: 200, reason: nil, seconds: worker < 9 ? 0.003 : 0.2, worker: worker)
            }
            if worker % 3 == 0 { metrics.request(endpoint: "push", outcome: "rate_limited", worker: worker) }
        }
        metrics.apnsAnswer(environment: "production", status: 410, reason: "Unregistered", seconds: 0.02, worker: 5)

        #expect(metrics.outcomes == ["ok": 1800, "rate_limited": 6])
        let text = metrics.render(inFlight: 0, counters: [])
        let lines = Set(text.split(separator: "\n").map(String.init))
        for line in [
            #"duo_relay_requests_total{endpoint="push",outcome="ok"} 1800"#,
            #"duo_relay_requests_total{endpoint="push",outcome="rate_limited"} 6"#,
            #"duo_relay_limiter_rejections_total{limit="phone"} 1800"#,
            #"duo_relay_grants_opened_total{key_id="7"} 1800"#,
            #"duo_relay_apns_responses_total{environment="sandbox",status="200",reason=""} 1800"#,
            #"duo_relay_apns_responses_total{environment="production",status="410",reason="Unregistered"} 1"#,
            #"duo_relay_apns_latency_seconds_bucket{environment="sandbox",le="0.005"} 900"#,
            #"duo_relay_apns_latency_seconds_bucket{environment="sandbox",le="0.1"} 900"#,
            #"duo_relay_apns_latency_seconds_bucket{environment="sandbox",le="0.25"} 1800"#,
            #"duo_relay_apns_latency_seconds_count{environment="sandbox"} 1800"#,
            #"duo_relay_apns_latency_seconds_bucket{environment="production",le="0.025"} 1"#,
        ] {
            #expect(lines.contains(line), "\(line)")
        }
        // Each family once, whatever the number of shards it was counted in.
        #expect(text.components(separatedBy: "# TYPE duo_relay_requests_total counter").count == 2)
        #expect(text.components(separatedBy: "# TYPE duo_relay_apns_latency_seconds histogram").count == 2)
    }
}
