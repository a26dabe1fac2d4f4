import HTTP1
import Testing

@testable import LoadGenerator

@Suite struct SoakScheduleTests {
    @Test func aSeedReplaysTheSameScheduleAndAnotherSeedDoesNot() {
        let kinds = SoakFault.allCases
        let first = SoakSchedule(seed: 42, seconds: 180, warmup: 10, tail: 15, gap: 8...13, kinds: kinds)
        let again = SoakSchedule(seed: 42, seconds: 180, warmup: 10, tail: 15, gap: 8...13, kinds: kinds)
        let other = SoakSchedule(seed: 43, seconds: 180, warmup: 10, tail: 15, gap: 8...13, kinds: kinds)
        #expect(first == again)
        #expect(first.text == again.text)
        #expect(first.entries != other.entries)
    }

    @Test func faultsStayBetweenTheWarmUpAndTheTailAndTheirGapsInRange() {
        for seed in UInt64(0)..<50 {
            let schedule = SoakSchedule(
                seed: seed, seconds: 180, warmup: 10, tail: 15, gap: 8...13, kinds: SoakFault.allCases)
            var previous = 10.0
            for entry in schedule.entries {
                #expect(entry.at - previous >= 8 - 1e-9 && entry.at - previous <= 13 + 1e-9)
                #expect(entry.at <= 165)
                #expect(entry.relay == 0 || entry.relay == 1)
                previous = entry.at
            }
        }
    }

    @Test func theSmokesScheduleHoldsEveryKindForEverySeed() {
        // scripts/soak --smoke: 180 s, 10 s of warm-up, 15 s of tail, a fault every 8 to 13 s.
        for seed in UInt64(0)..<200 {
            let schedule = SoakSchedule(
                seed: seed, seconds: 180, warmup: 10, tail: 15, gap: 8...13, kinds: SoakFault.allCases)
            #expect(schedule.missing(from: SoakFault.allCases).isEmpty, "seed \(seed)")
        }
        let short = SoakSchedule(seed: 1, seconds: 60, warmup: 10, tail: 15, gap: 8...13, kinds: SoakFault.allCases)
        #expect(!short.missing(from: SoakFault.allCases).isEmpty)
    }

    @Test func theTextNamesTheSeedAndEveryFault() {
        let schedule = SoakSchedule(seed: 7, seconds: 60, warmup: 5, tail: 5, gap: 10...10, kinds: [.apnsStall])
        #expect(
            schedule.text
                == "soak schedule: seed 7, 5 faults\n  +15.0s apns-stall\n  +25.0s apns-stall\n  +35.0s apns-stall\n"
                + "  +45.0s apns-stall\n  +55.0s apns-stall")
    }
}

@Suite struct SoakAccountingTests {
    static let policy = SoakPolicy(deadline: 8, phoneLimit: 3, phonePeriod: 10, instances: 2)

    static func push(
        _ push: Int, phone: Int = 0, at sent: Double, status: Int, error: String? = nil, limit: String? = nil,
        apnsID: String? = nil, after: Double = 0.01
    ) -> SoakAttempt {
        SoakAttempt(
            route: .push, push: push, phone: phone, relay: 0, sent: sent, ended: sent + after, ending: .answered,
            status: status, error: error, limit: limit, apnsID: apnsID)
    }

    static let sampled = [
        SoakSample(at: 0, relay: 0, incarnation: 0, rssKilobytes: 1, descriptors: 1, threads: 1, limits: "shared")
    ]

    static func verdict(_ attempts: [SoakAttempt], _ deliveries: [SoakDelivery], samples: [SoakSample] = sampled)
        -> SoakAccounting.Verdict
    {
        SoakAccounting(policy: policy, attempts: attempts, deliveries: deliveries, samples: samples).verdict()
    }

    /// One delivery, at its answer, of each attempt answered with an apns-id.
    static func deliveries(of attempts: [SoakAttempt]) -> [SoakDelivery] {
        attempts.compactMap { attempt in
            attempt.apnsID.map { SoakDelivery(apnsID: $0, push: attempt.push, at: attempt.ended) }
        }
    }

    static func total(_ verdict: SoakAccounting.Verdict, _ name: String) -> Int? {
        verdict.totals.first { $0.0 == name }?.1
    }

    @Test func aCleanRunKeepsEveryPromise() {
        let attempts = [
            Self.push(0, at: 1, status: 200, apnsID: "A"),
            Self.push(1, phone: 1, at: 2, status: 502, error: "apns"),
            Self.push(1, phone: 1, at: 3.5, status: 200, apnsID: "B"),
            Self.push(2, phone: 2, at: 4, status: 429, error: "rate_limited", limit: "phone"),
            SoakAttempt(
                route: .grant, push: -1, phone: 2, relay: 1, sent: 4, ended: 4.01, ending: .answered, status: 200),
        ]
        // Push 1's first send reached APNs (fate unknown to the relay); its resend was delivered too.
        let deliveries = [
            SoakDelivery(apnsID: "A", push: 0, at: 1.005), SoakDelivery(apnsID: "X", push: 1, at: 2.005),
            SoakDelivery(apnsID: "B", push: 1, at: 3.505),
        ]
        let verdict = Self.verdict(attempts, deliveries)
        #expect(verdict.violations.isEmpty)
        #expect(Self.total(verdict, "ok") == 2)
        #expect(Self.total(verdict, "deliveries") == 3)
        #expect(Self.total(verdict, "status_502") == 1)
        // Without a single sample of the relays, their flatness is not taken on trust.
        let unsampled = SoakAccounting(policy: Self.policy, attempts: attempts, deliveries: deliveries, samples: [])
        #expect(unsampled.verdict().violations.map(\.detail) == ["the relays were never sampled"])
    }

    /// The relay that answers 200 without sending: its answer carries an apns-id the simulator never delivered.
    @Test func aTwoHundredWithoutADeliveryBreaksThePromise() {
        let attempts = [Self.push(0, at: 1, status: 200, apnsID: "A"), Self.push(1, at: 2, status: 200, apnsID: "B")]
        let verdict = Self.verdict(attempts, [SoakDelivery(apnsID: "A", push: 0, at: 1.005)])
        #expect(verdict.violations.map(\.promise) == ["every 200 is a delivery"])
        #expect(Self.total(verdict, "ok_without_delivery") == 1)
        // ... and a 200 with no apns-id at all is not taken on trust.
        let bare = Self.verdict([Self.push(0, at: 1, status: 200)], [])
        #expect(bare.violations.map(\.promise) == ["every 200 is a delivery"])
    }

    @Test func aDeliveryAnsweredOtherwiseOrTwiceBreaksThePromise() {
        // Delivered, but answered 503 (which says nothing was sent): not allowed.
        let refused = Self.verdict(
            [Self.push(0, at: 1, status: 503, error: "overloaded")], [SoakDelivery(apnsID: "A", push: 0, at: 1.005)])
        #expect(refused.violations.map(\.promise) == ["every delivery answered 200 or 502"])
        // One 200, its apns-id delivered twice.
        let twice = Self.verdict(
            [Self.push(0, at: 1, status: 200, apnsID: "A")],
            [SoakDelivery(apnsID: "A", push: 0, at: 1.005), SoakDelivery(apnsID: "A", push: 0, at: 1.006)])
        #expect(twice.violations.map(\.promise) == ["exactly one delivery"])
        // Two deliveries of a push answered 502 once.
        let more = Self.verdict(
            [Self.push(0, at: 1, status: 502, error: "apns")],
            [SoakDelivery(apnsID: "A", push: 0, at: 1.005), SoakDelivery(apnsID: "B", push: 0, at: 1.006)])
        #expect(more.violations.map(\.promise) == ["every delivery answered 200 or 502"])
        let stranger = Self.verdict([], [SoakDelivery(apnsID: "A", push: -1, at: 1)])
        #expect(stranger.violations.map(\.promise) == ["every delivery answered 200 or 502"])
    }

    @Test func unansweredResetsUndocumentedAndLateAnswersBreakTheirPromises() {
        let attempts = [
            SoakAttempt(route: .push, push: 0, phone: 0, relay: 0, sent: 1, ended: 31, ending: .timedOut),
            SoakAttempt(route: .push, push: 1, phone: 0, relay: 0, sent: 1, ended: 1.2, ending: .closed),
            Self.push(2, at: 2, status: 500, error: "internal"),
            Self.push(3, at: 2, status: 429, error: "rate_limited"),
            Self.push(4, at: 2, status: 502, error: "apns", after: 9),
        ]
        let verdict = Self.verdict(attempts, [])
        #expect(
            verdict.violations.map(\.promise) == [
                "every request answered", "no reset", "documented answers only", "answered within the deadline",
            ])
        #expect(Self.total(verdict, "undocumented") == 2)
    }

    /// After an ExpiredProviderToken, the relay's other APNs connections may refuse its renewed token once each; a
    /// relay that went on sending a refused token breaks the promise.
    @Test func pushesRefusedForTheRelaysOwnTokenAreBoundedByThePolicy() {
        var policy = Self.policy
        policy.tokenUpdateRefusals = 2
        let refused = (0..<3).map { index in
            var attempt = Self.push(index, phone: index, at: Double(index + 1), status: 502, error: "apns")
            attempt.apnsReason = "TooManyProviderTokenUpdates"
            return attempt
        }
        func verdict(_ attempts: [SoakAttempt]) -> SoakAccounting.Verdict {
            SoakAccounting(policy: policy, attempts: attempts, deliveries: [], samples: Self.sampled).verdict()
        }
        #expect(verdict(Array(refused.prefix(2))).violations.isEmpty)
        let over = verdict(refused)
        #expect(over.violations.map(\.promise) == ["the relay's own token refused only briefly"])
        #expect(Self.total(over, "token_update_refusals") == 3)
        // What the channel reads from the 502's detail.
        #expect(
            SoakChannels.apnsReason("APNs refused the push (TooManyProviderTokenUpdates): it was not delivered")
                == "TooManyProviderTokenUpdates")
        #expect(SoakChannels.apnsReason("APNs refused the push: it was not delivered") == nil)
        #expect(SoakChannels.apnsReason("APNs could not be reached: the push was not delivered") == nil)
        #expect(SoakChannels.apnsReason(nil) == nil)
    }

    @Test func aPhonesBudgetHoldsPerWindowAndWidensOnlyDuringAFailover() {
        // Limit 3 per 10 s. Window from 0: three admitted, then 429s; the next window from 10.5 admits three more.
        var attempts = (0..<3).map { Self.push($0, at: Double($0), status: 200, apnsID: "A\($0)") }
        var refused = Self.push(3, at: 4, status: 429, error: "rate_limited", limit: "phone")
        refused.retryAfter = 6
        attempts.append(refused)
        attempts += (4..<7).map { Self.push($0, at: 10.5 + Double($0), status: 200, apnsID: "A\($0)") }
        let deliveries = Self.deliveries(of: attempts)
        #expect(Self.verdict(attempts, deliveries).violations.isEmpty)
        // A fourth in the first window, with limits shared throughout: over the budget.
        let over = attempts + [Self.push(7, at: 5, status: 502, error: "apns")]
        let shared = (0..<30).map {
            SoakSample(
                at: Double($0), relay: 0, incarnation: 0, rssKilobytes: 1, descriptors: 1, threads: 1,
                limits: "shared")
        }
        #expect(Self.verdict(over, deliveries, samples: shared).violations.map(\.promise) == ["phone budgets"])
        // The same while a relay counted alone: each instance's own admissions come on top of the shared count ...
        var failover = shared
        failover[5].limits = "local"
        #expect(Self.verdict(over, deliveries, samples: failover).violations.isEmpty)
        // (A relay that decided a phone's limit without Redis since its last sample counted alone too, whatever
        // `/readyz` said.)
        var fellBack = shared
        for index in fellBack.indices { fellBack[index].fallbacks = index < 5 ? 0 : 7 }
        #expect(Self.verdict(over, deliveries, samples: fellBack).violations.isEmpty)
        // ... and nothing more in that window once Redis is back: no fresh shared budget on top of them.
        let fresh = over + [Self.push(8, at: 7.5, status: 200, apnsID: "F8")]
        let freshDeliveries = deliveries + [SoakDelivery(apnsID: "F8", push: 8, at: 7.51)]
        #expect(
            Self.verdict(fresh, freshDeliveries, samples: failover).violations.map(\.promise) == ["phone budgets"])
    }

    /// A push decided alone while Redis was away is not in the shared window: the shared window opens later than the
    /// admissions alone show, and a refusal's `Retry-After` says where it ends.
    @Test func aRefusalPlacesTheWindowThatAdmissionsAloneWouldMisplace() {
        var samples = (0..<30).map {
            SoakSample(
                at: Double($0), relay: 0, incarnation: 0, rssKilobytes: 1, descriptors: 1, threads: 1,
                limits: "shared")
        }
        samples[0].limits = "local"
        // Decided alone at 0; the shared window opens at 4 (4, 5, 11; 12 refused until 14); the next at 14.5.
        var attempts = [0, 4, 5, 11, 14.5, 15, 20].enumerated().map {
            Self.push($0.offset, at: $0.element, status: 200, apnsID: "A\($0.offset)")
        }
        var refused = Self.push(7, at: 12, status: 429, error: "rate_limited", limit: "phone")
        refused.retryAfter = 2
        attempts.append(refused)
        let deliveries = Self.deliveries(of: attempts)
        #expect(Self.verdict(attempts, deliveries, samples: samples).violations.isEmpty)
        // One more in the window from 14.5 is over the limit.
        let over = attempts + [Self.push(8, at: 16, status: 200, apnsID: "A8")]
        let overDeliveries = deliveries + [SoakDelivery(apnsID: "A8", push: 8, at: 16.01)]
        #expect(
            Self.verdict(over, overDeliveries, samples: samples).violations.map(\.promise) == ["phone budgets"])
    }

    /// Pushes decided alone during a failover (the relays counted in memory) do not open the shared window: the next
    /// push counted in Redis does.
    @Test func pushesDecidedAloneDoNotOpenTheSharedWindow() {
        var samples = (0..<40).map {
            SoakSample(
                at: Double($0), relay: 0, incarnation: 0, rssKilobytes: 1, descriptors: 1, threads: 1,
                limits: "shared", fallbacks: 0)
        }
        for second in 2...3 { samples[second].fallbacks = second * 10 }
        for second in 4..<40 { samples[second].fallbacks = 30 }
        // Alone at 2 and 2.5; shared windows from 6 (6, 12, 13) and from 16.5 (16.5, 17, 18).
        let times = [2, 2.5, 6, 12, 13, 16.5, 17, 18]
        let attempts = times.enumerated().map {
            Self.push($0.offset, at: $0.element, status: 200, apnsID: "A\($0.offset)")
        }
        let deliveries = attempts.map { SoakDelivery(apnsID: $0.apnsID!, push: $0.push, at: $0.ended) }
        #expect(Self.verdict(attempts, deliveries, samples: samples).violations.isEmpty)
        let over = attempts + [Self.push(8, at: 19, status: 200, apnsID: "A8")]
        let overDeliveries = deliveries + [SoakDelivery(apnsID: "A8", push: 8, at: 19.01)]
        #expect(
            Self.verdict(over, overDeliveries, samples: samples).violations.map(\.promise) == ["phone budgets"])
    }

    /// A push decided alone after the shared window ended is carried over as the key's window: it starts at that push,
    /// and the pushes Redis admits next count in it (what the relay's carry-over does when Redis holds no open window).
    @Test func aPushDecidedAloneAfterTheWindowEndedOpensTheWindowItIsCarriedInto() {
        var samples = (0..<40).map {
            SoakSample(
                at: Double($0), relay: 0, incarnation: 0, rssKilobytes: 1, descriptors: 1, threads: 1,
                limits: "shared")
        }
        samples[11].limits = "local"
        // Shared [0, 10): 0 and 3. Alone at 10.5, carried as [10.5, 20.5): 15 and 16 fill it. Shared [21, 31): 21,
        // 22, 23. Replayed with no window opened by the push alone, [15, 25) would hold five.
        let times = [0, 3, 10.5, 15, 16, 21, 22, 23]
        let attempts = times.enumerated().map {
            Self.push($0.offset, at: $0.element, status: 200, apnsID: "A\($0.offset)")
        }
        let deliveries = attempts.map { SoakDelivery(apnsID: $0.apnsID!, push: $0.push, at: $0.ended) }
        let verdict = Self.verdict(attempts, deliveries, samples: samples)
        #expect(verdict.violations.isEmpty)
        #expect(Self.total(verdict, "phones_unplaced") == 0)
        // One more in the carried window is over its limit whichever way the push alone went.
        let over = attempts + [Self.push(8, at: 19, status: 200, apnsID: "A8")]
        let overDeliveries = deliveries + [SoakDelivery(apnsID: "A8", push: 8, at: 19.01)]
        #expect(
            Self.verdict(over, overDeliveries, samples: samples).violations.map(\.promise) == ["phone budgets"])
    }

    /// An instance carries over while it decides alone: its first admissions alone reach the shared window still open
    /// (and end with it), and the next one, once that window has ended, opens the key's window at the time of the
    /// instance's own window, its first admission alone. The pushes Redis admits then count from there.
    @Test func anEarlyCarryOverEndsWithTheOpenWindowAndALaterOneOpensTheNextAtTheInstancesOwnWindow() {
        var samples = (0..<40).map {
            SoakSample(
                at: Double($0), relay: 0, incarnation: 0, rssKilobytes: 1, descriptors: 1, threads: 1,
                limits: "shared")
        }
        samples += (0..<40).map {
            SoakSample(
                at: Double($0) + 0.5, relay: 1, incarnation: 0, rssKilobytes: 1, descriptors: 1, threads: 1,
                limits: (7...11).contains($0) ? "local" : "shared")
        }
        // Shared [0, 10): 0, 1, 2 (full). Relay 1 alone at 7 and 8 (carried into [0, 10)) and at 10.5 (carried once
        // [0, 10) has ended: the key's window is relay 1's own, [7, 17), holding one). Redis admits 13 and 13.5, and
        // refuses at 14 until 17.
        var attempts = [0, 1, 2, 7, 8, 10.5, 13, 13.5].enumerated().map {
            Self.push($0.offset, at: $0.element, status: 200, apnsID: "A\($0.offset)")
        }
        for index in 3...5 { attempts[index].relay = 1 }
        var refused = Self.push(8, at: 14, status: 429, error: "rate_limited", limit: "phone")
        refused.retryAfter = 3
        attempts.append(refused)
        let deliveries = Self.deliveries(of: attempts)
        let verdict = Self.verdict(attempts, deliveries, samples: samples)
        #expect(verdict.violations.isEmpty)
        #expect(Self.total(verdict, "phones_unplaced") == 0)
        // Two more admitted in [7, 17) are over its limit, however the pushes alone went.
        var over = attempts
        over[8] = Self.push(8, at: 14, status: 200, apnsID: "A8")
        over.append(Self.push(9, at: 14.5, status: 200, apnsID: "A9"))
        let overDeliveries =
            deliveries + [
                SoakDelivery(apnsID: "A8", push: 8, at: 14.01), SoakDelivery(apnsID: "A9", push: 9, at: 14.51),
            ]
        #expect(
            Self.verdict(over, overDeliveries, samples: samples).violations.map(\.promise) == ["phone budgets"])
    }

    /// A kept run's records read back as the run had them (older files lack the APNs reason column), so that
    /// `soak-budgets` judges them again.
    @Test func keptRecordsReadBackForJudgingAgain() throws {
        let attempts = try SoakRecords.attempts(
            """
            route,push,phone,relay,sent,ended,ending,status,error,limit,retry_after,apns_reason
            push,7,3,1,12.5000,12.5100,answered,429,rate_limited,phone,4,
            push,8,3,0,13.0000,13.2000,answered,502,apns,,,TooManyProviderTokenUpdates
            grant,-1,4,0,1.0000,1.0010,answered,200,,,,
            push,9,5,1,2.0000,32.0000,timedOut,0,,,,

            """)
        #expect(
            attempts == [
                SoakAttempt(
                    route: .push, push: 7, phone: 3, relay: 1, sent: 12.5, ended: 12.51, ending: .answered, status: 429,
                    error: "rate_limited", limit: "phone", retryAfter: 4),
                SoakAttempt(
                    route: .push, push: 8, phone: 3, relay: 0, sent: 13, ended: 13.2, ending: .answered, status: 502,
                    error: "apns", apnsReason: "TooManyProviderTokenUpdates"),
                SoakAttempt(
                    route: .grant, push: -1, phone: 4, relay: 0, sent: 1, ended: 1.001, ending: .answered, status: 200),
                SoakAttempt(route: .push, push: 9, phone: 5, relay: 1, sent: 2, ended: 32, ending: .timedOut),
            ])
        let older = try SoakRecords.attempts(
            "route,push,phone,relay,sent,ended,ending,status,error,limit,retry_after\npush,1,2,0,3.0,3.1,closed,0,,,\n")
        #expect(older.map(\.ending) == [.closed] && older.first?.apnsReason == nil)
        let samples = try SoakRecords.samples(
            "at,relay,incarnation,rss_kb,descriptors,threads,limits,fallbacks\n1.50,1,2,40000,100,10,local,17\n")
        #expect(
            samples == [
                SoakSample(
                    at: 1.5, relay: 1, incarnation: 2, rssKilobytes: 40000, descriptors: 100, threads: 10,
                    limits: "local", fallbacks: 17)
            ])
        #expect(throws: LoadError.self) { try SoakRecords.attempts("not,a,records,file\n") }
    }

    /// Two relays decide alone during one outage: whichever carries over first gives the key its window, and both add
    /// what they admitted to it. A refusal that names the later relay's start is explained, not left unplaced.
    @Test func bothRelaysAdmissionsAloneFillTheWindowTheFirstCarryOverOpens() {
        var samples = (0..<40).map {
            SoakSample(
                at: Double($0), relay: 0, incarnation: 0, rssKilobytes: 1, descriptors: 1, threads: 1,
                limits: "shared")
        }
        samples[12].limits = "local"
        // Shared [0, 10): 0. Alone: relay 1 at 11, relay 0 at 11.4 and 11.8; relay 0's window [11.4, 21.4) holds the
        // three, and refuses at 21.2 until 21.4; the next window opens at 21.5.
        var attempts = [0, 11, 11.4, 11.8, 21.5].enumerated().map {
            Self.push($0.offset, at: $0.element, status: 200, apnsID: "A\($0.offset)")
        }
        attempts[1].relay = 1
        var refused = Self.push(5, at: 21.2, status: 429, error: "rate_limited", limit: "phone")
        refused.retryAfter = 1
        attempts.append(refused)
        let deliveries = Self.deliveries(of: attempts)
        let verdict = Self.verdict(attempts, deliveries, samples: samples)
        #expect(verdict.violations.isEmpty)
        #expect(Self.total(verdict, "phones_unplaced") == 0)
    }

    /// Requests sent at once reach Redis in any order: a refusal answered before two admissions (which waited for
    /// APNs) may have been decided after them.
    @Test func aRefusalAnsweredFirstMayHaveBeenDecidedLast() {
        var attempts = [Self.push(0, at: 0, status: 200, apnsID: "A0")]
        attempts += (1..<3).map { Self.push($0, at: 5, status: 200, apnsID: "A\($0)", after: 0.1) }
        var refused = Self.push(3, at: 5, status: 429, error: "rate_limited", limit: "phone", after: 0.03)
        refused.retryAfter = 5
        attempts.append(refused)
        let deliveries = Self.deliveries(of: attempts)
        #expect(Self.verdict(attempts, deliveries).violations.isEmpty)
        #expect(Self.total(Self.verdict(attempts, deliveries), "phones_unplaced") == 0)
    }

    @Test func growthAfterWarmUpIsMeasuredPerRelayStart() {
        // Relay 0 lives 100 s with flat memory; relay 1 grows 200 kB a second; a short-lived start is not judged.
        var samples: [SoakSample] = []
        for second in 0..<100 {
            samples.append(
                SoakSample(
                    at: Double(second), relay: 0, incarnation: 0, rssKilobytes: 50_000, descriptors: 40, threads: 6,
                    limits: "shared"))
            samples.append(
                SoakSample(
                    at: Double(second), relay: 1, incarnation: 0, rssKilobytes: 50_000 + 200 * second,
                    descriptors: second < 50 ? 40 : 80, threads: second < 90 ? 6 : 7, limits: "shared"))
        }
        for second in 0..<20 {
            samples.append(
                SoakSample(
                    at: Double(second), relay: 0, incarnation: 1, rssKilobytes: 1000 * second, descriptors: 1,
                    threads: 1, limits: "shared"))
        }
        let verdict = SoakAccounting(policy: Self.policy, attempts: [], deliveries: [], samples: samples).verdict()
        #expect(verdict.growth.count == 2)
        #expect(verdict.growth[0].rssKilobytes == 0)
        #expect(verdict.violations.map(\.promise) == ["flat memory", "flat descriptors", "flat threads"])
    }

    @Test func aLogLineNamingAnIdentifierIsFound() {
        let token = String(repeating: "ab", count: 32)
        let lines: [Substring] = [
            "2026-12-05T14:00:00Z info duo-relay: listening on 127.0.0.1:8787",
            "2026-12-05T14:00:01Z warning apns sandbox: GOAWAY (Shutdown)",
            "2026-12-05T14:00:02Z warning bad token \(token.uppercased())",
            "grant=AQHxY2_abcdefghijklmnop-q",
        ]
        #expect(SoakAccounting.leakingLines(lines, identifiers: [token, "AQHxY2_abcdefghijklmnop-q"]) == 2)
        #expect(SoakAccounting.leakingLines(lines.prefix(2).map { $0 }, identifiers: [token]) == 0)
        // A server's address is configuration; a client's (another port) is an identifier.
        let addresses: [Substring] = [
            "limits store: connected to Redis at 127.0.0.1:6379", "listening on 127.0.0.1:8787",
            "refused 127.0.0.1:51234",
        ]
        #expect(SoakAccounting.addressLines(addresses, serverPorts: [6379, 8787]) == 1)
    }
}

@Suite struct SoakSamplingTests {
    @Test func procStatusFieldsAreRead() {
        let status = "Name:\tduo-relay\nVmRSS:\t   23456 kB\nThreads:\t9\n"
        #expect(SoakRun.field("VmRSS:", in: status) == 23456)
        #expect(SoakRun.field("Threads:", in: status) == 9)
        #expect(SoakRun.field("VmSwap:", in: status) == nil)
    }

    @Test func aStretchWithoutRedisRunsFromTheSampleBeforeToTheOneThatSawIt() {
        func sample(_ at: Double, relay: Int, _ limits: String, _ fallbacks: Int) -> SoakSample {
            SoakSample(
                at: at, relay: relay, incarnation: 0, rssKilobytes: 1, descriptors: 1, threads: 1, limits: limits,
                fallbacks: fallbacks)
        }
        // Relay 0's sampler fell behind from 1 to 4, and decisions without Redis grew meanwhile; relay 1 said
        // `local` at 2.
        let samples = [
            sample(1, relay: 0, "shared", 3), sample(4, relay: 0, "shared", 9), sample(5, relay: 0, "shared", 9),
            sample(1, relay: 1, "shared", 0), sample(2, relay: 1, "local", 0), sample(3, relay: 1, "shared", 0),
        ]
        let accounting = SoakAccounting(
            policy: SoakAccountingTests.policy, attempts: [], deliveries: [], samples: samples)
        // (Relay 0's first sample already counts 3: the second before it is a stretch too.)
        #expect(accounting.unsharedStretches() == [0...1, 1...2, 1...4])
    }

    @Test func retryAfterIsReadInWholeSecondsWhateverTheNamesCase() {
        func head(_ fields: [(String, String)]) -> HTTP1ResponseHead {
            HTTP1ResponseHead(
                version: .http11, status: 429, reason: "Too Many Requests",
                headers: HTTP1Headers(fields.map { (name: $0.0, value: $0.1) }), contentLength: 0, isChunked: false,
                keepAlive: true)
        }
        #expect(ClientConnection.retryAfter(head([("retry-AFTER", " 17")])) == 17)
        #expect(ClientConnection.retryAfter(head([("Content-Length", "0")])) == nil)
        #expect(ClientConnection.retryAfter(head([("Retry-After", "Fri, 31 Dec 1999 23:59:59 GMT")])) == nil)
    }

    @Test func theFallbackCountIsTheSumOfThePhoneLimitsDecisionsWithoutRedis() {
        let metrics = """
            # TYPE duo_relay_limits_store_fallback_total counter
            duo_relay_limits_store_fallback_total{limit="address",decision="allowed"} 9
            duo_relay_limits_store_fallback_total{limit="phone",decision="allowed"} 4
            duo_relay_limits_store_fallback_total{limit="phone",decision="refused"} 3
            """
        #expect(SoakRun.fallbacks(in: metrics) == 7)
        #expect(SoakRun.fallbacks(in: "duo_relay_up 1\n") == 0)
        #expect(SoakRun.fallbacks(in: "") == nil)
    }
}

@Suite struct SoakPictureTests {
    @Test func thePictureDrawsEveryStatusTheLatencyTheMemoryAndEveryFault() {
        let attempts = [
            SoakAttempt(
                route: .push, push: 0, phone: 0, relay: 0, sent: 0.5, ended: 0.6, ending: .answered, status: 200),
            SoakAttempt(
                route: .push, push: 1, phone: 0, relay: 0, sent: 1.5, ended: 1.7, ending: .answered, status: 502),
            SoakAttempt(route: .push, push: 2, phone: 0, relay: 0, sent: 1.5, ended: 2.5, ending: .closed),
        ]
        let samples = [
            SoakSample(at: 0, relay: 0, incarnation: 0, rssKilobytes: 20480, descriptors: 1, threads: 1, limits: nil),
            SoakSample(at: 1, relay: 1, incarnation: 0, rssKilobytes: 30720, descriptors: 1, threads: 1, limits: nil),
        ]
        let picture = SoakPicture(
            seconds: 3, attempts: attempts, samples: samples, relays: 2,
            marks: [.init(at: 1.2, name: "redis-primary-kill"), .init(at: 2.2, name: "proxy-restart")])
        #expect(picture.answers[0]["200"] == 1 && picture.answers[1]["502"] == 1 && picture.answers[2]["none"] == 1)
        #expect(picture.p99[0] != nil && abs(picture.p99[0]! - 100) < 1e-6 && picture.p99[2] == nil)
        #expect(picture.rss[0][0] == 20 && picture.rss[1][1] == 30)
        let svg = picture.svg
        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
        #expect(svg.hasSuffix("</svg>\n"))
        for text in [
            "answers per second by status", "p99 latency", "relay RSS", ">200<", ">502<", ">none<", ">relay 1<",
            "<title>redis-primary-kill</title>", "<title>proxy-restart</title>",
        ] {
            #expect(svg.contains(text), "\(text)")
        }
        #expect(svg.components(separatedBy: "<line ").count - 1 == 2)
    }
}
