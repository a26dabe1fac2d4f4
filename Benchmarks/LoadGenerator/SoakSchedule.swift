/// The faults a soak injects, by name (the names printed in the schedule and marked in the picture).
enum SoakFault: String, CaseIterable, Sendable, Equatable {
    /// `kill -9` of the Redis primary; the sentinels promote the replica, and the old primary comes back as a replica.
    case redisPrimaryKill = "redis-primary-kill"
    /// The replica stopped and started again.
    case redisReplicaRestart = "redis-replica-restart"
    /// The simulator answers a few requests in a row with GOAWAY (each refused unprocessed).
    case apnsGoawayBurst = "apns-goaway-burst"
    /// The simulator resets the TCP connection of a request (what was sent may have been processed).
    case apnsConnectionReset = "apns-connection-reset"
    /// The simulator never answers a few streams.
    case apnsStall = "apns-stall"
    /// The forwarder between the relays and the simulator resets every connection.
    case linkReset = "link-reset"
    /// The forwarder forgets every connection silently, as a NAT that timed out does.
    case linkStall = "link-stall"
    /// The simulator rejects one push's provider token with 403 ExpiredProviderToken.
    case providerTokenRejected = "provider-token-rejected"
    /// A new relay key is made the grant key and the previous one retired (its grants answer 401 and are renewed);
    /// SIGHUP to both relays.
    case relayKeyRotation = "relay-key-rotation"
    /// One relay is taken out of rotation, stopped (SIGTERM: it drains) and started again.
    case relayRollingRestart = "relay-rolling-restart"
    /// The egress proxy is stopped and started again.
    case proxyRestart = "proxy-restart"
}

/// A seeded generator (SplitMix64): the same seed gives the same numbers on every machine, so that a schedule can be
/// replayed from its seed alone.
struct SoakRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }

    /// A number in `range`, uniformly (with 1 ms steps: a schedule needs no finer).
    mutating func seconds(in range: ClosedRange<Double>) -> Double {
        let steps = UInt64(max(0, (range.upperBound - range.lowerBound) * 1000).rounded())
        return range.lowerBound + Double(steps == 0 ? 0 : next() % (steps + 1)) / 1000
    }
}

/// When each fault strikes during a soak, from a seed: pure, so that a seed replays the same schedule.
///
/// Faults come in rounds: each round is every kind once, in an order the seed shuffles, so that a run long enough
/// for one round injects every kind, and no kind waits many rounds for its turn. The gap before each fault is drawn
/// from `gap`. Nothing strikes during the warm-up, nor in the last `tail` seconds (the run's answers settle then).
struct SoakSchedule: Equatable, Sendable {
    struct Entry: Equatable, Sendable {
        /// Seconds from the start of the load.
        var at: Double
        var fault: SoakFault
        /// Which relay a fault aimed at one relay (a rolling restart) takes: 0 or 1.
        var relay: Int
    }

    var seed: UInt64
    var entries: [Entry]

    init(seed: UInt64, seconds: Double, warmup: Double, tail: Double, gap: ClosedRange<Double>, kinds: [SoakFault]) {
        self.seed = seed
        var random = SoakRandom(seed: seed)
        var entries: [Entry] = []
        var round: [SoakFault] = []
        var time = warmup
        while !kinds.isEmpty && gap.upperBound > 0 {
            time += random.seconds(in: gap)
            guard time <= seconds - tail else { break }
            if round.isEmpty { round = kinds.shuffled(using: &random) }
            let fault = round.removeLast()
            entries.append(Entry(at: time, fault: fault, relay: Int(random.next() % 2)))
        }
        self.entries = entries
    }

    /// The kinds of `kinds` that no entry injects.
    func missing(from kinds: [SoakFault]) -> [SoakFault] {
        kinds.filter { kind in !entries.contains { $0.fault == kind } }
    }

    /// The schedule as printed before a run: the seed, then one line per fault.
    var text: String {
        var lines = ["soak schedule: seed \(seed), \(entries.count) faults"]
        for entry in entries {
            let target = entry.fault == .relayRollingRestart ? " (relay \(entry.relay))" : ""
            lines.append("  +" + JSONText.number(entry.at, digits: 1) + "s " + entry.fault.rawValue + target)
        }
        return lines.joined(separator: "\n")
    }
}
