/// What one `scripts/bench` mode measures and for how long: the sections it runs, each measurement's
/// seconds, the rates and the rounds. BENCHMARKS.md, "Running the measurements", describes the modes.
struct BenchPlan: Equatable {
    enum Mode: String, CaseIterable {
        /// Every figure (about nine minutes, release).
        case full
        /// Every figure measured briefly (about a minute): the pipeline's check in `scripts/test`.
        case smoke
        /// Only what a push's CPU moves: saturation against h2load, the relay beside nginx at 1,000/s three
        /// times, system calls; the other figures are null and do not fail the run.
        case cpu
        /// Only the Redis store against memory: saturated pairs, latency, 1,000/s pairs, the delayed hop.
        case redis
        /// Only the provider token forced to refresh at 1,000/s against no refresh, the key in a SoftHSM token, in
        /// the same token made slow, and in a file (about three minutes).
        case token
        /// Only the relay serving TLS: saturated against its plain front, at 1,000/s against nginx terminating TLS in
        /// front of it, and idle connections, TLS and plain.
        case tls
    }

    let mode: Mode
    /// Grants minted, one per device token, cycled by every push run.
    var tokens = 4096
    /// Pairs of alternating runs (the relay and h2load; memory and Redis): each figure is the median of its
    /// rounds, so that a disturbed second moves one sample, not the result.
    var rounds = 3
    var saturationSeconds = 6.0
    var warmupSeconds = 2.0
    var concurrencyLevels = [1, 16, 64, 256]
    var levelSeconds = 5.0
    var directSeconds = 6.0
    var latencySeconds = 10.0
    var latencyWarmupSeconds = 1.0
    var latencyRate = 2000.0
    var grantSeconds = 10.0
    var idleConnections = 10_000
    var idleSettleSeconds = 2.0
    /// The fixed-rate runs: 1,000/s in pairs (memory, Redis).
    var fixedSeconds = 6.0
    var fixedRate = 1000
    /// The relay beside nginx: each rate once (the --cpu run: 1,000/s three times).
    var rates = [200, 1000, 2000, 5000]
    var rateSeconds = 6.0
    var syscallsSeconds = 5.0
    /// Redis one network hop away: the delay each way (BENCH_REDIS_HOP_MS).
    var hopMilliseconds = 0.5
    /// The saturation runs' connections (BENCH_CONNECTIONS).
    var saturationConnections = 64
    /// The provider-token runs (BenchTokenRefresh.swift): for each key kind, this many pairs of runs at `tokenRate`
    /// (no refresh, then a refresh forced half way), each `tokenSeconds` after `tokenWarmupSeconds`.
    var tokenRounds = 2
    var tokenRate = 1000
    var tokenSeconds = 10.0
    var tokenWarmupSeconds = 1.0
    /// The TLS section's alternating pairs (TLS and plain saturated; the relay with tls and the pair at 1,000/s).
    var tlsRounds = 2

    init(mode: Mode, hopMilliseconds: Double = 0.5, saturationConnections: Int = 64) {
        self.mode = mode
        self.hopMilliseconds = hopMilliseconds
        self.saturationConnections = saturationConnections
        switch mode {
        case .full, .redis, .token:
            break
        case .tls:
            saturationSeconds = 5
            warmupSeconds = 1
        case .smoke:
            tokens = 128
            rounds = 1
            saturationSeconds = 1
            warmupSeconds = 0.2
            concurrencyLevels = [16]
            levelSeconds = 1
            directSeconds = 1
            latencySeconds = 0.5
            latencyWarmupSeconds = 0.2
            latencyRate = 500
            grantSeconds = 1
            idleConnections = 500
            idleSettleSeconds = 0.5
            fixedSeconds = 0.5
            rateSeconds = 0.5
            syscallsSeconds = 0.5
            tokenRounds = 1
            tokenRate = 500
            tokenSeconds = 1
            tokenWarmupSeconds = 0.2
            tlsRounds = 1
        case .cpu:
            rounds = 2
            saturationSeconds = 5
            warmupSeconds = 1
            directSeconds = 5
            syscallsSeconds = 4
            rates = [1000, 1000, 1000]
        }
    }

    /// The relay against h2load at saturation (every mode but --redis, --token and --tls).
    var measuresSaturation: Bool { mode != .redis && mode != .token && mode != .tls }
    /// Concurrency, latency, grants and idle connections (the full and smoke runs).
    var measuresServing: Bool { mode == .full || mode == .smoke }
    /// The relay beside nginx at fixed rates, and the system calls per push (every mode but --redis, --token and
    /// --tls); the optional perf pass too.
    var measuresAnchor: Bool { mode != .redis && mode != .token && mode != .tls }
    /// The Redis store against memory, and Redis one hop away (every mode but --cpu, --token and --tls).
    var measuresRedis: Bool { mode != .cpu && mode != .token && mode != .tls }
    /// The provider token forced to refresh against no refresh (the full, smoke and --token runs).
    var measuresTokenRefresh: Bool { mode == .full || mode == .smoke || mode == .token }
    /// The relay serving TLS (the full, smoke and --tls runs).
    var measuresTLS: Bool { mode == .full || mode == .smoke || mode == .tls }

    /// h2load's streams on each of its two connections: as many requests in flight as the relay's run.
    var directStreams: Int { (saturationConnections + 1) / 2 }

    /// How long the relay and nginx run at `rate`: CPU is read from /proc in 10 ms ticks, so each rate runs for
    /// at least 500 requests, and nginx's CPU at 200/s (about 100 µs a request) spans several ticks even in the
    /// smoke run (half a second read 0 ticks there).
    func seconds(atRate rate: Int) -> Double { max(rateSeconds, 500 / Double(rate)) }
}
