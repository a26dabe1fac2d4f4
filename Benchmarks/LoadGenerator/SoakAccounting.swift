/// One request a soak's channels sent and what became of it (times in seconds from the start of the load).
struct SoakAttempt: Equatable, Sendable {
    enum Route: Equatable, Sendable {
        case push
        case grant
    }

    enum Ending: Equatable, Sendable {
        /// A complete answer arrived.
        case answered
        /// The connection ended (closed or reset) with the request unanswered.
        case closed
        /// No answer by the channel's own timeout: the connection was given up.
        case timedOut
    }

    var route: Route
    /// The push's number (its `id` on every resend), or -1 for a grant request.
    var push: Int
    var phone: Int
    var relay: Int
    var sent: Double
    /// When the answer arrived, or the request was given up.
    var ended: Double
    var ending: Ending
    /// The HTTP status, 0 without an answer.
    var status: Int = 0
    /// The body's `error`, `limit` and `apns_id`.
    var error: String? = nil
    var limit: String? = nil
    var apnsID: String? = nil
    /// `Retry-After` in seconds, when the answer had one.
    var retryAfter: Int? = nil
}

/// One notification the APNs simulator delivered (answered 200).
struct SoakDelivery: Equatable, Sendable {
    var apnsID: String
    /// The push it carried (by its `apns-collapse-id`, the push's `id`), or -1 if no push had that id.
    var push: Int
    var at: Double
}

/// A relay's process as sampled once a second from /proc, and its `/readyz` limits.
struct SoakSample: Equatable, Sendable {
    var at: Double
    var relay: Int
    /// Which start of that relay (0 first; a rolling restart makes the next).
    var incarnation: Int
    var rssKilobytes: Int
    var descriptors: Int
    var threads: Int
    /// `/readyz`'s `limits` (`shared`, `local`, ...), nil when it did not answer.
    var limits: String?
    /// The phone limit's decisions taken without Redis so far (`duo_relay_limits_store_fallback_total`), nil when
    /// `/metrics` did not answer: a Redis call answered late is decided alone even while `/readyz` says `shared`.
    var fallbacks: Int? = nil
}

/// What the accounting holds a run to.
struct SoakPolicy: Equatable, Sendable {
    /// Every request is answered within this many seconds.
    var deadline: Double
    /// The per-phone limit the relays run with.
    var phoneLimit: Int
    var phonePeriod: Double
    /// How many relays share the limits (each may admit its own limit while it cannot count in Redis).
    var instances: Int
    /// Seconds of each relay process's life left out of the flatness checks (its warm-up), and how many seconds at
    /// each end of the rest are averaged.
    var warmup: Double = 20
    var flatWindow: Double = 10
    /// How much a process's RSS may grow after its warm-up, in kilobytes; descriptors may end this many above.
    var rssGrowthKilobytes: Int = 8192
    var descriptorSlack: Int = 16
}

/// The promises of a soak, checked from both ends: what the channels got back, what the simulator delivered, what the
/// relays' processes did. Pure: the shell collects the records and hands them over.
struct SoakAccounting: Sendable {
    var policy: SoakPolicy
    var attempts: [SoakAttempt]
    var deliveries: [SoakDelivery]
    var samples: [SoakSample]

    /// One broken promise, in words that name no identifier.
    struct Violation: Equatable, Sendable {
        var promise: String
        var detail: String
    }

    struct Verdict: Sendable {
        var totals: [(String, Int)]
        var violations: [Violation]
        /// Each relay incarnation's growth after warm-up: RSS (kB), descriptors, threads.
        var growth: [(relay: Int, incarnation: Int, rssKilobytes: Int, descriptors: Int, threads: Int)]
    }

    /// The statuses and error codes docs/API.md gives each route.
    static func documented(_ attempt: SoakAttempt) -> Bool {
        switch (attempt.route, attempt.status, attempt.error) {
        case (_, 200, nil), (_, 400, "bad_request"), (_, 413, "too_large"), (_, 503, "overloaded"): return true
        case (.grant, 400, "environment_unavailable"): return true
        case (_, 429, "rate_limited"):
            return attempt.limit == "address" || (attempt.route == .push && ["phone", "apns"].contains(attempt.limit))
        case (.push, 401, "grant_invalid"), (.push, 401, "grant_expired"), (.push, 410, "unregistered"),
            (.push, 502, "apns"):
            return true
        default: return false
        }
    }

    /// Whether the relay counted this push against its phone (its grant opened, its address was admitted).
    static func admitted(_ attempt: SoakAttempt) -> Bool {
        guard attempt.route == .push, attempt.ending == .answered else { return false }
        return [200, 410, 502].contains(attempt.status) || (attempt.status == 429 && attempt.limit == "apns")
    }

    func verdict() -> Verdict {
        var violations: [Violation] = []
        func violate(_ promise: String, _ count: Int, _ detail: String) {
            if count > 0 { violations.append(Violation(promise: promise, detail: "\(count) \(detail)")) }
        }
        let answered = attempts.filter { $0.ending == .answered }
        let closed = attempts.count { $0.ending == .closed }
        let timedOut = attempts.count { $0.ending == .timedOut }
        let undocumented = answered.count { !Self.documented($0) }
        let late = answered.count { $0.ended - $0.sent > policy.deadline }
        violate("every request answered", timedOut, "requests got no answer")
        violate("no reset", closed, "requests saw their connection end unanswered")
        violate("documented answers only", undocumented, "answers not documented for their route")
        violate("answered within the deadline", late, "answers came after the deadline")

        // Deliveries against answers: every 200 is exactly one delivery (by apns-id); every other delivery belongs to
        // a push answered 502 at least as many times.
        var byAPNsID: [String: Int] = [:]
        for delivery in deliveries { byAPNsID[delivery.apnsID, default: 0] += 1 }
        let oks = answered.filter { $0.route == .push && $0.status == 200 }
        var claimed = Set<String>()
        var missing = 0
        var duplicated = 0
        var withoutID = 0
        for ok in oks {
            guard let id = ok.apnsID else {
                withoutID += 1
                continue
            }
            claimed.insert(id)
            switch byAPNsID[id, default: 0] {
            case 0: missing += 1
            case 1: break
            default: duplicated += 1
            }
        }
        var unknownFate: [Int: Int] = [:]
        for attempt in answered where attempt.route == .push && attempt.status == 502 {
            unknownFate[attempt.push, default: 0] += 1
        }
        var unclaimed: [Int: Int] = [:]
        var strangers = 0
        for delivery in deliveries where !claimed.contains(delivery.apnsID) {
            if delivery.push < 0 { strangers += 1 } else { unclaimed[delivery.push, default: 0] += 1 }
        }
        let unexplained = unclaimed.reduce(0) { $0 + max(0, $1.value - unknownFate[$1.key, default: 0]) }
        violate("every 200 is a delivery", missing, "answers 200 with no delivery of their apns-id")
        violate("every 200 is a delivery", withoutID, "answers 200 without an apns_id")
        violate("exactly one delivery", duplicated, "answers 200 whose apns-id was delivered more than once")
        violate("every delivery answered 200 or 502", unexplained, "deliveries answered neither 200 nor 502")
        violate("every delivery answered 200 or 502", strangers, "deliveries of no push the channels sent")

        let (budgetViolations, windows) = budgets()
        violations += budgetViolations
        let growth = flatness()
        if !attempts.isEmpty && samples.isEmpty {
            violations.append(Violation(promise: "flat memory", detail: "the relays were never sampled"))
        }
        for item in growth {
            let name = "relay \(item.relay) (start \(item.incarnation + 1))"
            if item.rssKilobytes > policy.rssGrowthKilobytes {
                violations.append(
                    Violation(promise: "flat memory", detail: "\(name): RSS grew \(item.rssKilobytes) kB after warm-up")
                )
            }
            if item.descriptors > policy.descriptorSlack {
                violations.append(
                    Violation(
                        promise: "flat descriptors", detail: "\(name): \(item.descriptors) more descriptors at the end")
                )
            }
            if item.threads > 0 {
                violations.append(
                    Violation(promise: "flat threads", detail: "\(name): \(item.threads) more threads at the end"))
            }
        }

        var totals: [(String, Int)] = [
            ("requests", attempts.count), ("pushes", Set(attempts.filter { $0.route == .push }.map(\.push)).count),
            ("answered", answered.count), ("unanswered", timedOut), ("resets", closed), ("undocumented", undocumented),
            ("late", late), ("deliveries", deliveries.count), ("ok", oks.count), ("ok_without_delivery", missing),
            ("duplicate_deliveries", duplicated), ("deliveries_unexplained", unexplained + strangers),
            ("phone_windows_checked", windows), ("budget_violations", budgetViolations.count),
        ]
        var statuses: [Int: Int] = [:]
        for attempt in answered { statuses[attempt.status, default: 0] += 1 }
        totals += statuses.sorted { $0.key < $1.key }.map { ("status_\($0.key)", $0.value) }
        return Verdict(totals: totals, violations: violations, growth: growth)
    }

    /// The seconds during which some relay did not count in Redis (each sample stands for the second before it): its
    /// `/readyz` did not say `shared`, or it decided a phone's limit without Redis since the sample before. A window
    /// that meets one may hold each instance's own limit besides the shared count before it.
    func unsharedSeconds() -> [Double] {
        var previous: [[Int]: Int] = [:]
        var seconds: [Double] = []
        for sample in samples.sorted(by: { $0.at < $1.at }) {
            let key = [sample.relay, sample.incarnation]
            var alone = sample.limits != "shared"
            if let fallbacks = sample.fallbacks {
                if fallbacks > previous[key, default: 0] { alone = true }
                previous[key] = fallbacks
            }
            if alone { seconds.append(sample.at) }
        }
        return seconds
    }

    /// Each phone's admissions, window by window, as the relay's fixed windows run: a window opens at an admission and
    /// lasts the period; the next opens at the first admission after it. The relay decides a push's limit before it
    /// calls APNs, so a decision lies between the push's send and its answer, nearer the send. A window's end is known
    /// within a band: from its opening push's send and answer, narrowed by a refusal inside it (`Retry-After`, whole
    /// seconds, names the end), or taken from the refusal alone when the two disagree (the window opened where it
    /// could not be seen: a push decided alone while Redis was away is not in the shared window, and never opens
    /// one; a push answered within a second of a sample that found limits not shared may have been). An admission that
    /// is not surely in a window (sent within its end band, or within the previous one's) is not held against it.
    /// Beyond the contract: more than the limit in a window, or, in a window that meets a second when limits were not
    /// shared, more than the limit plus each instance's own ("Several instances", Failover).
    func budgets() -> ([Violation], Int) {
        let unshared = unsharedSeconds()
        var byPhone: [Int: [SoakAttempt]] = [:]
        for attempt in attempts where attempt.route == .push && attempt.ending == .answered {
            if Self.admitted(attempt) || (attempt.status == 429 && attempt.limit == "phone") {
                byPhone[attempt.phone, default: []].append(attempt)
            }
        }
        func maybeAlone(_ event: SoakAttempt) -> Bool {
            unshared.contains { $0 >= event.sent - 1 && $0 <= event.ended + 1 }
        }
        var violations: [Violation] = []
        var windows = 0
        for (phone, events) in byPhone.sorted(by: { $0.key < $1.key }) {
            let sorted = events.sorted { $0.sent < $1.sent }
            var index = 0
            var previousBand = -Double.infinity ... -Double.infinity
            while index < sorted.count {
                // A push decided alone (maybe) never opens a shared window: its relay's window was its own.
                guard Self.admitted(sorted[index]), !maybeAlone(sorted[index]) else {
                    index += 1
                    continue
                }
                let first = index
                let start = sorted[first].sent
                var band = (start + policy.phonePeriod)...(sorted[first].ended + policy.phonePeriod)
                var scan = first + 1
                while scan < sorted.count && sorted[scan].sent < band.upperBound {
                    let event = sorted[scan]
                    if !Self.admitted(event), let retryAfter = event.retryAfter {
                        let told = (event.sent + Double(retryAfter) - 1)...(event.ended + Double(retryAfter))
                        band = band.overlaps(told) ? band.clamped(to: told) : told
                    }
                    scan += 1
                }
                var count = 0
                var unsure = 0
                scan = first
                while scan < sorted.count && sorted[scan].sent < band.upperBound {
                    let event = sorted[scan]
                    if Self.admitted(event) {
                        count += 1
                        if event.sent >= band.lowerBound || event.ended > band.lowerBound
                            || previousBand.contains(event.sent)
                        {
                            unsure += 1
                        }
                    }
                    scan += 1
                }
                // The next window opens at the first admission from the band's start (one within the band may belong
                // to either).
                index = first + 1
                while index < sorted.count && sorted[index].sent < band.lowerBound { index += 1 }
                previousBand = band
                windows += 1
                let degraded = unshared.contains { $0 >= start - 1 && $0 <= band.upperBound + 1 }
                let bound = degraded ? policy.phoneLimit * (1 + policy.instances) : policy.phoneLimit
                if count - unsure > bound {
                    let what = degraded ? "during a failover" : "with shared limits"
                    violations.append(
                        Violation(
                            promise: "phone budgets",
                            detail:
                                "phone \(phone): \(count) admitted (\(unsure) of them maybe not in it) in the window "
                                + "from " + JSONText.number(start, digits: 1) + " s \(what), over \(bound)"))
                }
            }
        }
        return (violations, windows)
    }

    /// Per relay start with enough life after its warm-up: RSS, descriptors and threads at the end (averaged over
    /// the last `flatWindow` seconds) less the same just after warm-up.
    func flatness() -> [(relay: Int, incarnation: Int, rssKilobytes: Int, descriptors: Int, threads: Int)] {
        var lives: [[Int]: [SoakSample]] = [:]
        for sample in samples { lives[[sample.relay, sample.incarnation], default: []].append(sample) }
        var result: [(relay: Int, incarnation: Int, rssKilobytes: Int, descriptors: Int, threads: Int)] = []
        for (key, life) in lives.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            let sorted = life.sorted { $0.at < $1.at }
            guard let born = sorted.first?.at, let died = sorted.last?.at else { continue }
            let settled = sorted.filter { $0.at >= born + policy.warmup }
            guard died - born >= policy.warmup + 3 * policy.flatWindow else { continue }
            let first = settled.filter { $0.at < born + policy.warmup + policy.flatWindow }
            let last = settled.filter { $0.at > died - policy.flatWindow }
            func mean(_ samples: [SoakSample], _ value: (SoakSample) -> Int) -> Int {
                samples.isEmpty ? 0 : samples.map(value).reduce(0, +) / samples.count
            }
            result.append(
                (
                    key[0], key[1], mean(last, \.rssKilobytes) - mean(first, \.rssKilobytes),
                    mean(last, \.descriptors) - mean(first, \.descriptors),
                    // The fewest threads at each end: a reload's threads come and go, a leaked one stays.
                    (last.map(\.threads).min() ?? 0) - (first.map(\.threads).min() ?? 0)
                ))
        }
        return result
    }

    /// How many lines of `lines` hold one of `identifiers` (tokens, grants, ids, threads, in the case they were
    /// sent): each line is cut into runs of letters, digits, `-` and `_`, and each run looked up.
    static func leakingLines(_ lines: [Substring], identifiers: Set<String>) -> Int {
        lines.count { line in
            line.split { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }.contains { word in
                word.count >= 16 && (identifiers.contains(String(word)) || identifiers.contains(word.lowercased()))
            }
        }
    }
}
