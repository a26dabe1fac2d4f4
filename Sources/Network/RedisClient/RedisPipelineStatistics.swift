/// Counters of a ``RedisPipeline``, for metrics and tests.
public struct RedisPipelineStatistics: Sendable, Equatable {
    /// The round-trip histogram's bucket bounds, in seconds.
    public static let latencyBounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]

    /// Requests answered by `count`, per bucket of ``latencyBounds`` (not cumulative), the last one above them all.
    public var latencyBuckets = [Int](repeating: 0, count: latencyBounds.count + 1)
    public var latencyCount = 0
    public var latencySum = 0.0
    /// Faults by ``RedisClientError/Code`` name: a lost connection or failed attempt counts once, a script error per request.
    public var errors: [String: Int] = [:]
    /// TCP connections made.
    public var connectionsOpened = 0
    /// Times the script was loaded again after NOSCRIPT.
    public var scriptReloads = 0
    /// Writes made to the server (each carries every request that waited for it: requests per write is the batching).
    public var writes = 0

    public init() {}

    mutating func record(latency seconds: Double) {
        var index = 0
        while index < Self.latencyBounds.count && seconds > Self.latencyBounds[index] { index += 1 }
        latencyBuckets[index] += 1
        latencyCount += 1
        latencySum += seconds
    }
}
