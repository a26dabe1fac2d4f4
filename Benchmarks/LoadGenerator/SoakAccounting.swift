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
    /// For a 502 whose detail names what APNs answered (`APNs refused the push (REASON): ...`), that reason.
    var apnsReason: String? = nil
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
    /// How many pushes may be refused for the relay's own provider token (APNs' TooManyProviderTokenUpdates): after
    /// an ExpiredProviderToken on one connection, each other connection may refuse the renewed token for the pushes
    /// it carries then, once, before it is replaced. The run sets it from the faults it injected.
    var tokenUpdateRefusals: Int = 0
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
        let tokenRefusals = answered.count { $0.apnsReason == "TooManyProviderTokenUpdates" }
        if tokenRefusals > policy.tokenUpdateRefusals {
            violations.append(
                Violation(
                    promise: "the relay's own token refused only briefly",
                    detail: "\(tokenRefusals) pushes refused TooManyProviderTokenUpdates, more than the "
                        + "\(policy.tokenUpdateRefusals) the connections open at each renewal could carry"))
        }

        let (budgetViolations, phonesChecked, unplaced) = budgets()
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
            ("phones_checked", phonesChecked), ("phones_unplaced", unplaced),
            ("budget_violations", budgetViolations.count), ("token_update_refusals", tokenRefusals),
        ]
        var statuses: [Int: Int] = [:]
        for attempt in answered { statuses[attempt.status, default: 0] += 1 }
        totals += statuses.sorted { $0.key < $1.key }.map { ("status_\($0.key)", $0.value) }
        return Verdict(totals: totals, violations: violations, growth: growth)
    }

    /// The stretches of time during which some relay may not have counted in Redis: from a sample to the next (of the
    /// same relay start) that found its `/readyz` not saying `shared`, or its count of decisions taken without Redis
    /// grown (the sampler can fall behind: a stretch is as long as the gap between the two samples).
    func unsharedStretches() -> [ClosedRange<Double>] {
        var previous: [[Int]: (at: Double, fallbacks: Int)] = [:]
        var stretches: [ClosedRange<Double>] = []
        for sample in samples.sorted(by: { $0.at < $1.at }) {
            let key = [sample.relay, sample.incarnation]
            let before = previous[key]
            var alone = sample.limits != "shared"
            if let fallbacks = sample.fallbacks, fallbacks > (before?.fallbacks ?? 0) { alone = true }
            if alone { stretches.append(min(before?.at ?? sample.at - 1, sample.at)...sample.at) }
            previous[key] = (sample.at, sample.fallbacks ?? before?.fallbacks ?? 0)
        }
        return stretches
    }

    /// A push's attempt, by its number and when it was sent.
    struct LocalKey: Hashable {
        var push: Int
        var sent: Double
    }

    /// One way a phone's pushes may have met the relay's shared window, while ``budgets()`` replays them.
    struct Placement: Hashable {
        /// The open window's end lies in this band (its opening push was decided between its send and its answer;
        /// a refusal's `Retry-After` narrows it); nil: no window open.
        var endLow: Double?
        var endHigh: Double?
        /// Admissions the shared window holds: those decided in Redis, and those decided alone while Redis was away
        /// (the contract adds them to the window they belong to once Redis is back).
        var count = 0
        /// The outage (an index into the merged stretches without Redis) whose carry-over opened the open window, if
        /// one did: every instance's carry-over of that outage adds to it, whichever came first.
        var carriedFrom: Int?
        /// Pushes this way had Redis admit beyond the window's limit, and when the first was sent.
        var over = 0
        var firstOver: Double?
    }

    /// The phones' budgets, replayed against the contract's fixed windows ("Limits", "Several instances"). Each push's
    /// decision lies between its send and its answer; one within half a second of a stretch when some relay may not
    /// have counted in Redis (``unsharedStretches()``) may have been decided alone; a refusal names its window's end
    /// within a second (`Retry-After`), and is taken in turn at its answer (requests sent together are decided in any
    /// order). A push decided alone is carried into Redis once it is back: into the window open there, or, when none
    /// is open by then, as the window itself (the instance's own window, opened at its first admission alone, becomes
    /// the key's). An instance carries while it decides alone, so the first of its admissions alone may reach a shared
    /// window still open and end with it, and a later one then opens the key's window at that first admission's time.
    /// Every way the pushes could have met the windows is followed (equal ones merged), and those a
    /// refusal contradicts are dropped. A push decided in Redis is admitted only while its window holds fewer than the
    /// limit, counting the window's pushes decided alone: so a window that spans a failover holds at most what it had
    /// before plus each instance's own admissions, and nothing more until it ends. A phone breaks its budget when
    /// every way left admits beyond that; a phone no way explains is counted as unplaced, not judged.
    func budgets() -> (violations: [Violation], phones: Int, unplaced: Int) {
        let unshared = unsharedStretches()
        func maybeAlone(_ event: SoakAttempt) -> Bool {
            let decided = (event.sent - 0.5)...(event.ended + 0.5)
            return unshared.contains { $0.overlaps(decided) }
        }
        // The outages: stretches that overlap or nearly touch, merged. A relay carries over when it counts in Redis
        // again, within a couple of seconds of its outage's last stretch (the sampler's pace).
        var outages: [ClosedRange<Double>] = []
        for stretch in unshared.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = outages.last, stretch.lowerBound <= last.upperBound + 1 {
                outages[outages.count - 1] = last.lowerBound...max(last.upperBound, stretch.upperBound)
            } else {
                outages.append(stretch)
            }
        }
        func outage(_ event: SoakAttempt) -> Int? {
            let decided = (event.sent - 0.5)...(event.ended + 0.5)
            return outages.lastIndex { $0.overlaps(decided) }
        }
        var byPhone: [Int: [SoakAttempt]] = [:]
        for attempt in attempts where attempt.route == .push && attempt.ending == .answered {
            if Self.admitted(attempt) || (attempt.status == 429 && attempt.limit == "phone") {
                byPhone[attempt.phone, default: []].append(attempt)
            }
        }
        var violations: [Violation] = []
        var unplaced = 0
        let period = policy.phonePeriod
        let limit = policy.phoneLimit
        for (phone, events) in byPhone.sorted(by: { $0.key < $1.key }) {
            // Each instance's own window for the phone, as far as its admissions that may have been alone tell: opened
            // by the first, and by the first after it has passed; by push and send.
            var localStart: [LocalKey: SoakAttempt] = [:]
            var opened: [Int: SoakAttempt] = [:]
            for event in events.sorted(by: { $0.sent < $1.sent }) where Self.admitted(event) && maybeAlone(event) {
                if let start = opened[event.relay], event.sent < start.sent + period {
                    localStart[LocalKey(push: event.push, sent: event.sent)] = start
                } else {
                    opened[event.relay] = event
                }
            }
            var ways: Set<Placement> = [Placement()]
            // In the order the relay decided them, as near as the records tell: an admission soon after its send (its
            // answer waits for APNs), a refusal just before its answer (it waits for nothing). Requests sent together
            // reach Redis in any order, and a refusal answered first may have been decided after them.
            func decided(_ event: SoakAttempt) -> Double { Self.admitted(event) ? event.sent : event.ended }
            for event in events.sorted(by: { decided($0) < decided($1) }) {
                var next: Set<Placement> = []
                for way in ways {
                    // Whether the event falls in the open window, after it, or either.
                    var positions: [Bool] = []  // true: inside the open window
                    if let low = way.endLow, let high = way.endHigh {
                        if event.ended < low {
                            positions = [true]
                        } else if event.sent >= high {
                            positions = [false]
                        } else {
                            positions = [true, false]
                        }
                    } else {
                        positions = [false]
                    }
                    for inside in positions {
                        var base = way
                        if !inside {
                            base.endLow = nil
                            base.endHigh = nil
                            base.count = 0
                            base.carriedFrom = nil
                        }
                        if Self.admitted(event) {
                            if maybeAlone(event) {
                                // Decided alone, and carried over once Redis is back: counted in the open window if it
                                // is still open then; ...
                                var alone = base
                                if alone.endLow != nil { alone.count += 1 }
                                next.insert(alone)
                                // ... or, when no window is open in Redis by then (the carry-over comes within a
                                // couple of seconds of the outage's end), the instance's own window (opened by its
                                // first admission alone) becomes the key's: it starts here, and holds what every
                                // instance carries from this outage.
                                let during = outage(event)
                                let carriedBy = during.map { outages[$0].upperBound + 2 } ?? event.ended
                                let sameOutage = during != nil && base.carriedFrom == during
                                if sameOutage || (base.endLow ?? -Double.infinity) <= carriedBy {
                                    let own = localStart[LocalKey(push: event.push, sent: event.sent)]
                                    let starts = [event] + (own.map { [$0] } ?? [])
                                    for start in starts {
                                        var carried = base
                                        carried.endLow = start.sent + period
                                        carried.endHigh = start.ended + period
                                        carried.count = sameOutage ? base.count + 1 : 1
                                        carried.carriedFrom = during
                                        next.insert(carried)
                                    }
                                }
                            }
                            var shared = base
                            if shared.endLow == nil {
                                shared.endLow = event.sent + period
                                shared.endHigh = event.ended + period
                                shared.count = 1
                            } else {
                                if shared.count >= limit {
                                    shared.over += 1
                                    shared.firstOver = shared.firstOver ?? event.sent
                                }
                                shared.count += 1
                            }
                            next.insert(shared)
                        } else {
                            // A refusal: decided alone, or by a full open window whose end it names.
                            if maybeAlone(event) { next.insert(base) }
                            guard let low = base.endLow, let high = base.endHigh, base.count >= limit else { continue }
                            guard let retryAfter = event.retryAfter else {
                                next.insert(base)
                                continue
                            }
                            let toldLow = event.sent + Double(retryAfter) - 1
                            let toldHigh = event.ended + Double(retryAfter)
                            guard toldLow <= high && low <= toldHigh else { continue }
                            var refused = base
                            refused.endLow = max(low, toldLow)
                            refused.endHigh = min(high, toldHigh)
                            next.insert(refused)
                        }
                    }
                }
                // The ways with the fewest admissions over the limit are kept when there are too many.
                if next.count > 256 {
                    next = Set(next.sorted { ($0.over, $0.count) < ($1.over, $1.count) }.prefix(256))
                }
                ways = next
                if ways.isEmpty { break }
            }
            guard let best = ways.min(by: { $0.over < $1.over }) else {
                unplaced += 1
                continue
            }
            if best.over > 0 {
                violations.append(
                    Violation(
                        promise: "phone budgets",
                        detail: "phone \(phone): admitted beyond its window's limit \(best.over) times, first at "
                            + JSONText.number(best.firstOver ?? 0, digits: 1) + " s"))
            }
        }
        return (violations, byPhone.count, unplaced)
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

    /// How many lines of `lines` name a loopback address with a port that none of the soak's servers listens on: a
    /// client's address (every client here is 127.0.0.1, on a port of its own).
    static func addressLines(_ lines: [Substring], serverPorts: Set<Int>) -> Int {
        lines.count { line in
            line.components(separatedBy: "127.0.0.1:").dropFirst().contains { rest in
                guard let port = Int(rest.prefix { $0.isNumber }) else { return false }
                return !serverPorts.contains(port)
            }
        }
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
