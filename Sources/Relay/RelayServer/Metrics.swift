import RelayVersion
import Synchronization

/// Aggregate counts for operators, exposed in the Prometheus text format. Labels only ever carry
/// values from small fixed sets (endpoints, error codes, APNs statuses and reasons, key ids):
/// never a token, address, grant, id or thread.
///
/// Each worker counts in a shard of its own (the caller names its worker, ``HTTPRequestHead/worker``), so that the
/// workers never take a lock another worker takes. The shards are added up when the metrics are read.
final class Metrics: Sendable {
    /// The APNs latency histogram's bucket bounds, in seconds.
    static let latencyBounds: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// APNs reasons worth their own label; any other reason counts as "other".
    static let knownReasons: Set<String> = [
        "BadCollapseId", "BadDeviceToken", "BadExpirationDate", "BadMessageId", "BadPriority", "BadTopic",
        "DeviceTokenNotForTopic", "DuplicateHeaders", "IdleTimeout", "InvalidPushType", "MissingDeviceToken",
        "MissingTopic", "PayloadEmpty", "TopicDisallowed", "BadCertificate", "BadCertificateEnvironment",
        "ExpiredProviderToken", "Forbidden", "InvalidProviderToken", "MissingProviderToken", "BadPath",
        "MethodNotAllowed", "ExpiredToken", "Unregistered", "PayloadTooLarge", "TooManyProviderTokenUpdates",
        "TooManyRequests", "InternalServerError", "ServiceUnavailable", "Shutdown",
    ]

    private struct Histogram {
        var buckets = [Int](repeating: 0, count: Metrics.latencyBounds.count)
        var count = 0
        var sum = 0.0

        mutating func record(_ seconds: Double) {
            for (index, bound) in Metrics.latencyBounds.enumerated() where seconds <= bound {
                buckets[index] += 1
            }
            count += 1
            sum += seconds
        }

        mutating func add(_ other: Histogram) {
            for index in buckets.indices { buckets[index] += other.buckets[index] }
            count += other.count
            sum += other.sum
        }
    }

    private struct RequestKey: Hashable {
        var endpoint: String
        var outcome: String
    }

    private struct APNsKey: Hashable {
        var environment: String
        var status: Int
        var reason: String
    }

    /// Counters keyed by their label values; label text is only built when rendering, so counting
    /// (several times per push) allocates nothing.
    private struct State {
        var requests: [RequestKey: Int] = [:]
        var rejections: [String: Int] = [:]
        var grantsOpened = [Int](repeating: 0, count: 256)
        var apnsResponses: [APNsKey: Int] = [:]
        var histograms: [String: Histogram] = [:]

        /// Adds another shard's counts to these.
        mutating func add(_ other: State) {
            requests.merge(other.requests, uniquingKeysWith: +)
            rejections.merge(other.rejections, uniquingKeysWith: +)
            for index in grantsOpened.indices { grantsOpened[index] += other.grantsOpened[index] }
            apnsResponses.merge(other.apnsResponses, uniquingKeysWith: +)
            for (environment, histogram) in other.histograms {
                histograms[environment, default: Histogram()].add(histogram)
            }
        }

        /// The counters as `name -> labels -> value`, the shape the exposition is written from.
        var labelled: [String: [String: Int]] {
            var out: [String: [String: Int]] = [:]
            for (key, value) in requests {
                out["duo_relay_requests_total", default: [:]][
                    #"endpoint="\#(key.endpoint)",outcome="\#(key.outcome)""#] = value
            }
            for (limit, value) in rejections {
                out["duo_relay_limiter_rejections_total", default: [:]][#"limit="\#(limit)""#] = value
            }
            for (keyID, value) in grantsOpened.enumerated() where value > 0 {
                out["duo_relay_grants_opened_total", default: [:]][#"key_id="\#(keyID)""#] = value
            }
            for (key, value) in apnsResponses {
                out["duo_relay_apns_responses_total", default: [:]][
                    #"environment="\#(key.environment)",status="\#(key.status)",reason="\#(key.reason)""#] = value
            }
            return out
        }
    }

    /// One worker's counts. Padded past two cache lines, so that the locks of two shards made one after the other
    /// (neighbours in the allocator's slab) never share a line. The dictionaries' storage is allocated apart and is not
    /// padded: two shards' may still neighbour.
    private final class Shard: Sendable {
        let state = Mutex(State())
        private let padding: (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int) = (
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
        )
    }

    /// A shard per worker, modulo their count: more workers than shards only share shards (and their locks).
    private static let shardCount = 16  // a power of two
    private let shards = (0..<Metrics.shardCount).map { _ in Shard() }

    init() {}

    /// Worker `worker`'s shard.
    private func shard(_ worker: Int) -> Shard {
        shards[worker & (Self.shardCount - 1)]
    }

    /// Every shard's counts, added up.
    private var total: State {
        var total = State()
        for shard in shards { total.add(shard.state.withLock { $0 }) }
        return total
    }

    /// One request answered by `worker`: `endpoint` is `grant`, `push`, `healthz` or `other`; `outcome` is
    /// `ok` or the error code.
    func request(endpoint: String, outcome: String, worker: Int) {
        let key = RequestKey(endpoint: endpoint, outcome: outcome)
        shard(worker).state.withLock { $0.requests[key, default: 0] += 1 }
    }

    /// A limiter refused a request: `limit` is `address` or `phone`.
    func limited(_ limit: String, worker: Int) {
        shard(worker).state.withLock { $0.rejections[limit, default: 0] += 1 }
    }

    /// A grant opened with `keyID` (shows when an old key stops being used).
    func grantOpened(keyID: UInt8, worker: Int) {
        shard(worker).state.withLock { $0.grantsOpened[Int(keyID)] += 1 }
    }

    /// APNs answered (status 0: no answer: timeout or connection failure).
    func apnsAnswer(environment: String, status: Int, reason: String?, seconds: Double, worker: Int) {
        let reasonLabel = reason.map { Self.knownReasons.contains($0) ? $0 : "other" } ?? ""
        let key = APNsKey(environment: environment, status: status, reason: reasonLabel)
        shard(worker).state.withLock { state in
            state.apnsResponses[key, default: 0] += 1
            state.histograms[environment, default: Histogram()].record(seconds)
        }
    }

    /// Requests answered, by outcome (for the line a stopping relay prints).
    var outcomes: [String: Int] {
        let counts = total.requests
        var totals: [String: Int] = [:]
        for (key, value) in counts { totals[key.outcome, default: 0] += value }
        return totals
    }

    /// The Prometheus text exposition (version 0.0.4).
    /// - Parameters:
    ///   - inFlight: pushes currently waiting for APNs.
    ///   - counters: values owned elsewhere (token refreshes, connections), already labelled.
    func render(inFlight: Int, counters: [CounterSample]) -> String {
        let snapshot = total
        let labelled = snapshot.labelled
        var out = ""
        let help: [String: (String, String)] = [
            "duo_relay_requests_total": ("counter", "Requests answered, by endpoint and outcome."),
            "duo_relay_limiter_rejections_total": ("counter", "Requests refused by a limiter."),
            "duo_relay_grants_opened_total": ("counter", "Grants opened, by relay key id."),
            "duo_relay_apns_responses_total": ("counter", "APNs answers by status and reason (status 0: none)."),
        ]
        for name in help.keys.sorted() {
            let (type, text) = help[name]!
            out += "# HELP \(name) \(text)\n# TYPE \(name) \(type)\n"
            for (labels, value) in (labelled[name] ?? [:]).sorted(by: { $0.key < $1.key }) {
                out += "\(name){\(labels)} \(value)\n"
            }
        }
        out += "# HELP duo_relay_build_info The running version (always 1).\n# TYPE duo_relay_build_info gauge\n"
        out += #"duo_relay_build_info{version="\#(RelayVersion.text)"} 1"# + "\n"
        out += "# HELP duo_relay_pushes_in_flight Pushes accepted and not yet answered.\n"
        out += "# TYPE duo_relay_pushes_in_flight gauge\nduo_relay_pushes_in_flight \(inFlight)\n"
        // One group per family (Prometheus' text format expects a family's lines together): the counters come
        // per environment, so they are gathered by name, in the order the names first appear.
        var names: [String] = []
        var families: [String: (help: String, lines: String)] = [:]
        for counter in counters {
            if families[counter.name] == nil {
                names.append(counter.name)
                families[counter.name] = (counter.help, "")
            }
            families[counter.name]!.lines += "\(counter.name){\(counter.labels)} \(counter.value)\n"
        }
        for name in names {
            let family = families[name]!
            out += "# HELP \(name) \(family.help)\n# TYPE \(name) counter\n" + family.lines
        }
        out += "# HELP duo_relay_apns_latency_seconds Time from sending a push to APNs' answer.\n"
        out += "# TYPE duo_relay_apns_latency_seconds histogram\n"
        for (environment, histogram) in snapshot.histograms.sorted(by: { $0.key < $1.key }) {
            for (index, bound) in Self.latencyBounds.enumerated() {
                out +=
                    #"duo_relay_apns_latency_seconds_bucket{environment="\#(environment)",le="\#(bound)"} "#
                    + "\(histogram.buckets[index])\n"
            }
            out += #"duo_relay_apns_latency_seconds_bucket{environment="\#(environment)",le="+Inf"} "#
            out += "\(histogram.count)\n"
            out += #"duo_relay_apns_latency_seconds_sum{environment="\#(environment)"} \#(histogram.sum)"# + "\n"
            out += #"duo_relay_apns_latency_seconds_count{environment="\#(environment)"} \#(histogram.count)"# + "\n"
        }
        return out
    }
}
