import RedisClient
import RelayCore
import Synchronization

/// The Redis limits store that every instance shares (DESIGN.md, "Several instances"): one
/// pipelined connection, whose state decides where limit decisions come from while it is down
/// (`on_failure`), one log line when it is lost and one when it is back, and the metrics.
final class SharedLimitsStore: Sendable {
    enum Health: String {
        case shared, local, unavailable
    }

    struct FallbackKey: Hashable {
        var limit: String
        var decision: String
    }

    let pipeline: RedisPipeline
    let settings: LimitsStore
    private let link = Link()
    private let fallbacks = Mutex<[FallbackKey: Int]>([:])

    /// The connection's state as last reported; a class, so that the event handler can hold it.
    private final class Link: Sendable {
        let connected = Atomic<Bool>(false)
        /// Whether a loss has been reported: the next connection is a return.
        let lost = Atomic<Bool>(false)
    }

    init(settings: LimitsStore, url: RedisURL, password: String?) throws(RedisClientError) {
        self.settings = settings
        var client = RedisClientConfiguration(host: url.host, port: url.port, script: SharedWindowScript.source)
        client.useTLS = url.tls
        client.caFile = settings.caFile
        client.database = url.database
        client.username = settings.username
        client.password = password
        client.timeout = .milliseconds(settings.timeoutMilliseconds)
        client.connectTimeout = .milliseconds(max(1_000, min(5_000, settings.timeoutMilliseconds * 10)))
        let link = self.link
        let onFailure = settings.onFailure
        let location = "\(url.host):\(url.port)"
        pipeline = try RedisPipeline(configuration: client) { event in
            switch event {
            case .connected:
                link.connected.store(true, ordering: .releasing)
                if link.lost.exchange(false, ordering: .acquiringAndReleasing) {
                    Log.line("duo-relay: limits store: Redis at \(location) is back; limits are shared again")
                } else {
                    Log.line("duo-relay: limits store: connected to Redis at \(location); limits are shared")
                }
            case .lost(let error):
                link.connected.store(false, ordering: .releasing)
                link.lost.store(true, ordering: .releasing)
                let meanwhile =
                    onFailure == .local
                    ? "each instance limits with its own memory until it is back"
                    : "limited requests are refused with 503 until it is back"
                Log.line("duo-relay: limits store: lost Redis at \(location) (\(error)); \(meanwhile)")
            }
        }
    }

    /// Connects; waits for the first attempt so a relay whose Redis is up starts shared.
    func start() {
        pipeline.start()
        _ = pipeline.awaitFirstAttempt(timeout: .seconds(6))
    }

    func shutdown() { pipeline.shutdown() }

    var health: Health {
        if link.connected.load(ordering: .acquiring) { return .shared }
        return settings.onFailure == .local ? .local : .unavailable
    }

    /// A decision taken without Redis: `limit` is `phone` or `address`.
    func countFallback(limit: String) {
        let key = FallbackKey(limit: limit, decision: settings.onFailure == .local ? "local" : "refused")
        fallbacks.withLock { $0[key, default: 0] += 1 }
    }

    /// The store's metrics in the Prometheus text format (names in /readyz's terms).
    func renderMetrics() -> String {
        let statistics = pipeline.currentStatistics
        let health = self.health
        var out = "# HELP duo_relay_limits_store_up 1 while the Redis limits store is connected and shared.\n"
        out += "# TYPE duo_relay_limits_store_up gauge\nduo_relay_limits_store_up \(health == .shared ? 1 : 0)\n"
        out += "# HELP duo_relay_limits_store_state Where limit decisions come from now (as /readyz \"limits\").\n"
        out += "# TYPE duo_relay_limits_store_state gauge\n"
        for state in [Health.local, .shared, .unavailable] {
            out += #"duo_relay_limits_store_state{state="\#(state.rawValue)"} \#(state == health ? 1 : 0)"# + "\n"
        }
        out += "# HELP duo_relay_limits_store_errors_total Faults talking to the Redis limits store, by kind.\n"
        out += "# TYPE duo_relay_limits_store_errors_total counter\n"
        for kind in ["auth", "closed", "protocol", "refused", "script", "timeout", "tls"] {
            out += #"duo_relay_limits_store_errors_total{kind="\#(kind)"} \#(statistics.errors[kind] ?? 0)"# + "\n"
        }
        out += "# HELP duo_relay_limits_store_fallback_total Limit decisions taken without Redis.\n"
        out += "# TYPE duo_relay_limits_store_fallback_total counter\n"
        let counts = fallbacks.withLock { $0 }
        let decision = settings.onFailure == .local ? "local" : "refused"
        for limit in ["address", "phone"] {
            let value = counts[FallbackKey(limit: limit, decision: decision)] ?? 0
            out += #"duo_relay_limits_store_fallback_total{limit="\#(limit)",decision="\#(decision)"} \#(value)"# + "\n"
        }
        out += "# HELP duo_relay_limits_store_latency_seconds Redis round trip per limit decision.\n"
        out += "# TYPE duo_relay_limits_store_latency_seconds histogram\n"
        var cumulative = 0
        for (index, bound) in RedisPipelineStatistics.latencyBounds.enumerated() {
            cumulative += statistics.latencyBuckets[index]
            out += #"duo_relay_limits_store_latency_seconds_bucket{le="\#(bound)"} \#(cumulative)"# + "\n"
        }
        out += #"duo_relay_limits_store_latency_seconds_bucket{le="+Inf"} \#(statistics.latencyCount)"# + "\n"
        out += "duo_relay_limits_store_latency_seconds_sum \(statistics.latencySum)\n"
        out += "duo_relay_limits_store_latency_seconds_count \(statistics.latencyCount)\n"
        return out
    }
}
