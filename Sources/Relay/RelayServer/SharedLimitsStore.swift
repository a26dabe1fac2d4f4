import EventLoops
import MonotonicTime
import RedisClient
import RelayCore
import Synchronization

/// The Redis limits store that every instance shares (docs/DESIGN.md, "Several instances"): one pipelined connection per
/// worker loop (so that a request's decision never leaves the thread that read it), their state together deciding
/// where limit decisions come from while Redis is away, refuses writes or fails every call (`on_failure`), one log
/// line for the process when it leaves or loses a server (and why) and one when it uses one again (its address), and
/// the metrics. With `limits_store.sentinel`, each pipeline asks the sentinels where the primary is (docs/DESIGN.md,
/// "Failover").
final class SharedLimitsStore: Sendable {
    enum Health: String {
        case shared, local, unavailable
    }

    struct FallbackKey: Hashable {
        var limit: String
        var decision: String
    }

    let settings: LimitsStore
    /// Each worker's pipeline, on its loop, by the worker's index (``HTTPServer/HTTPRequestHead/worker``).
    private let pipelines: [RedisPipeline]
    private let link: Link
    private let fallbacks = Mutex<[FallbackKey: Int]>([:])
    /// What this instance admitted alone and still owes Redis.
    let carry: SharedCarryOver

    /// The pipelines' states together: a class, so that their event handlers can hold it (and not the store).
    private final class Link: Sendable {
        private struct State {
            var pipelines = 0
            var connected = Set<Int>()
            /// The first connection has been announced.
            var announced = false
            /// A loss has been logged: the next time every pipeline is connected is a return.
            var lost = false
            /// The server of the last connection announced (`host:port`).
            var server = ""
        }

        private let state = Mutex(State())
        /// Every pipeline is connected and its calls answered: decisions are made in Redis (read on every
        /// `/readyz`).
        let shared = Atomic<Bool>(false)
        /// Where the relay looks for Redis, for a line about no server in particular.
        let location: String
        let onFailure: LimitsStore.OnFailure

        init(location: String, onFailure: LimitsStore.OnFailure, pipelines: Int) {
            self.location = location
            self.onFailure = onFailure
            state.withLock { $0.pipelines = pipelines }
        }

        /// One pipeline's event about `server`: the process logs its first connection, its first loss or refusal
        /// (and why), and its return once every pipeline is connected again (not one line per worker).
        func report(_ event: RedisPipeline.Event, server: String, from index: Int) {
            let line: String? = state.withLock { state in
                let place = server.isEmpty ? location : "Redis at \(server)"
                switch event {
                case .connected:
                    state.connected.insert(index)
                    guard state.connected.count == state.pipelines else { return nil }
                    shared.store(true, ordering: .releasing)
                    let previous = state.server
                    state.server = server
                    if state.lost {
                        state.lost = false
                        return server == previous
                            ? "duo-relay: limits store: \(place) is back; limits are shared again"
                            : "duo-relay: limits store: using \(place), the primary now; limits are shared again"
                    }
                    guard !state.announced else { return nil }
                    state.announced = true
                    return "duo-relay: limits store: connected to \(place); limits are shared"
                case .lost(let error), .failing(let error):
                    state.connected.remove(index)
                    shared.store(false, ordering: .releasing)
                    guard !state.lost else { return nil }
                    state.lost = true
                    let meanwhile =
                        onFailure == .local
                        ? "each instance limits with its own memory until it is back"
                        : "limited requests are refused with 503 until it is back"
                    if case .failing = event {
                        return "duo-relay: limits store: \(place) answers the limits' calls with errors "
                            + "(\(error)); \(meanwhile)"
                    }
                    if error.code == .notPrimary {
                        return "duo-relay: limits store: leaving \(place): \(error.reason); \(meanwhile)"
                    }
                    if error.code == .auth {
                        return "duo-relay: limits store: \(place) refused the relay's credentials: \(error.reason) "
                            + "(REDIS_PASSWORD, limits_store.username); \(meanwhile)"
                    }
                    guard state.announced else {
                        return "duo-relay: limits store: cannot use \(place) (\(error)); \(meanwhile)"
                    }
                    return "duo-relay: limits store: lost \(place) (\(error)); \(meanwhile)"
                }
            }
            if let line { Log.line(line) }
        }
    }

    /// A pipeline for each of `loops` (the workers'; none for a check of the settings, such as a `rediss://` CA
    /// file that must load); connects nothing until ``start()``. `settings` has a url or a sentinel block.
    init(
        settings: LimitsStore, password: String?, sentinelPassword: String?, loops: [EventLoop]
    ) throws(RedisClientError) {
        self.settings = settings
        var client: RedisClientConfiguration
        let location: String
        if let sentinel = settings.sentinel {
            client = RedisClientConfiguration(host: sentinel.master, port: 0, script: SharedLimitsScript.source)
            var nodes = RedisClientConfiguration.Sentinel(
                master: sentinel.master, nodes: sentinel.nodes.map { (host: $0.host, port: $0.port) })
            nodes.password = sentinelPassword
            client.sentinel = nodes
            client.useTLS = sentinel.tls
            client.database = sentinel.database
            location = "the primary of sentinel master \(sentinel.master)"
        } else {
            let url = settings.url ?? RedisURL(host: "127.0.0.1", port: 6379)
            client = RedisClientConfiguration(host: url.host, port: url.port, script: SharedLimitsScript.source)
            client.useTLS = url.tls
            client.database = url.database
            location = "Redis at \(ListenAddress(host: url.host, port: url.port))"
        }
        client.caFile = settings.caFile
        client.username = settings.username
        client.password = password
        client.timeout = .milliseconds(settings.timeoutMilliseconds)
        client.connectTimeout = .milliseconds(max(1_000, min(5_000, settings.timeoutMilliseconds * 10)))
        let link = Link(location: location, onFailure: settings.onFailure, pipelines: loops.count)
        self.link = link
        let siblings = Siblings()
        let carry = SharedCarryOver()
        self.carry = carry
        var pipelines: [RedisPipeline] = []
        for (index, loop) in loops.enumerated() {
            // The events are reported to the link, not the store: a pipeline never holds the store.
            pipelines.append(
                try RedisPipeline(
                    configuration: client, loop: loop,
                    onServerEvent: { event, server in
                        link.report(event, server: server, from: index)
                        if case .connected = event { carry.ready(worker: index) }
                        // The primary has moved for every worker: those without a call since must not stay behind.
                        if case .lost(let error) = event, error.code == .notPrimary {
                            siblings.leave(except: index, because: error)
                        }
                    }))
        }
        siblings.set(pipelines)
        if loops.isEmpty { try RedisPipeline.validate(client) }
        self.pipelines = pipelines
    }

    /// Every worker's pipeline, held weakly (a pipeline's event handler holds this, and a pipeline must not hold
    /// itself).
    private final class Siblings: Sendable {
        private struct Reference {
            weak var pipeline: RedisPipeline?
        }
        private let references = Mutex<[Reference]>([])

        func set(_ pipelines: [RedisPipeline]) {
            references.withLock { $0 = pipelines.map { Reference(pipeline: $0) } }
        }

        func leave(except index: Int, because error: RedisClientError) {
            let others = references.withLock { references in
                references.enumerated().filter { $0.offset != index }.compactMap(\.element.pipeline)
            }
            let reason = RedisClientError(.closed, "another worker found the server not the primary: " + error.reason)
            for pipeline in others { pipeline.leaveServer(reason) }
        }
    }

    /// Connects every worker's pipeline; waits (at most 6 s) for every first attempt, so that a relay whose Redis is
    /// up starts shared.
    func start() {
        for pipeline in pipelines { pipeline.start() }
        let deadline = EventLoop.monotonicNow() + .seconds(6)
        for pipeline in pipelines {
            _ = pipeline.awaitFirstAttempt(timeout: .nanoseconds(Int64(deadline - EventLoop.monotonicNow())))
        }
    }

    /// The pipeline of `worker` (whose loop runs the request's callbacks); nil for a worker without one.
    func pipeline(worker: Int) -> RedisPipeline? {
        worker < pipelines.count ? pipelines[worker] : nil
    }

    /// Closes every pipeline (requests still waiting are decided without Redis), each on its loop; before the
    /// worker loops stop. Idempotent.
    func shutdown() {
        for pipeline in pipelines { pipeline.shutdown() }
    }

    var health: Health {
        // Not while what was admitted alone is being added: decisions are still local then.
        if link.shared.load(ordering: .acquiring) && carry.isClear { return .shared }
        return settings.onFailure == .local ? .local : .unavailable
    }

    /// A decision taken without Redis: `limit` is `phone` or `address`.
    func countFallback(limit: String) {
        let key = FallbackKey(limit: limit, decision: settings.onFailure == .local ? "local" : "refused")
        fallbacks.withLock { $0[key, default: 0] += 1 }
    }

    /// Every pipeline's counters added up.
    private var statistics: RedisPipelineStatistics {
        var total = RedisPipelineStatistics()
        for pipeline in pipelines {
            let statistics = pipeline.currentStatistics
            for index in total.latencyBuckets.indices {
                total.latencyBuckets[index] += statistics.latencyBuckets[index]
            }
            total.latencyCount += statistics.latencyCount
            total.latencySum += statistics.latencySum
            total.errors.merge(statistics.errors, uniquingKeysWith: +)
            total.connectionsOpened += statistics.connectionsOpened
            total.scriptReloads += statistics.scriptReloads
        }
        return total
    }

    /// The store's metrics in the Prometheus text format (names in /readyz's terms).
    func renderMetrics() -> String {
        let statistics = self.statistics
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
        for kind in ["auth", "closed", "not_primary", "protocol", "refused", "script", "timeout", "tls"] {
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
        out += "# HELP duo_relay_limits_store_latency_seconds Redis round trip per request's limit decisions.\n"
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
