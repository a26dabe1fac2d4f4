import EventLoops
import RelayCore
import RelayCrypto

/// The soak's channels, on one event loop: new pushes at a fixed rate across many phones (a few pushed faster than
/// their limit allows, a few whose tokens APNs has unregistered), over keep-alive connections to every relay in
/// rotation, each connection with one request in flight. They behave as docs/API.md tells a channel to: a phone's
/// grant is minted when first needed and renewed after a 401; a 410 drops the registration (the phone comes back
/// with a new token, as a reinstalled app does); 429 and 503 are resent with the same `id` after `Retry-After`, and
/// dropped once stale; 502 (and a connection lost before its answer) is resent with the same `id` after 1, 2 and 4 s.
/// Every request and what became of it is recorded for the accounting.
final class SoakChannels: ClientConnectionOwner {
    struct Settings: Sendable {
        /// Each relay's address and `Host` text.
        var relays: [(address: ResolvedAddress, host: String)]
        var connectionsPerRelay: Int
        /// New pushes per second, all phones together.
        var rate: Double
        /// Seconds of new pushes; then the resends settle for up to `settle` seconds.
        var seconds: Double
        var settle: Double
        var phones: Int
        /// Phones pushed `hotRate` times a second each, over their limit.
        var hotPhones: Int
        var hotRate: Double
        /// Phones whose token starts with `deadPrefix` (the simulator answers 410 for them).
        var deadPhones: Int
        var deadPrefix: String
        /// A request unanswered this long is given up (its connection closed).
        var clientTimeout: Double
        /// A push is dropped once this old (its 429s and 503s made it stale).
        var staleAfter: Double
        var seed: UInt64
        /// The start of the run (monotonic nanoseconds): every recorded time counts from it.
        var begin: UInt64
    }

    /// What the run hands to the accounting.
    struct Records: Sendable {
        var attempts: [SoakAttempt]
        /// Each push's `id`, by its number.
        var ids: [String]
        /// Every token, grant and thread a request carried (the log check looks for them and for the ids).
        var identifiers: [String]
        /// Pushes given up: stale, out of resends, or still waiting at the end.
        var abandoned: Int
        var scheduled: Int
        var elapsed: Double
    }

    private enum Job {
        case push(Int)
        case grant(Int)
    }

    private struct Phone {
        var token: String
        var thread: String
        var grant: String?
        var minting = false
        var waiting: [Int] = []
        let hot: Bool
        let dead: Bool
        /// This token's number: phones first, then each new token a dropped registration got.
        var registration: Int
    }

    private struct Push {
        var phone: Int
        var id: String
        var created: UInt64
        var sends = 0
        var unknownFates = 0
        var done = false
    }

    private struct InFlight {
        var job: Job
        var sent: UInt64
        /// The phone's registration when it was sent (each token a phone has is one; the limit is the token's).
        var registration: Int
    }

    let settings: Settings
    let loop: EventLoop
    private let finish: @Sendable (Records) -> Void
    private var random: SoakRandom
    private var phones: [Phone] = []
    private var pushes: [Push] = []
    private var attempts: [SoakAttempt] = []
    private var identifiers: [String] = []
    private var pool: [ClientConnection?] = []
    private var relayOf: [Int] = []
    private var inFlight: [InFlight?] = []
    private var idle: [[Int]]
    private var inRotation: [Bool]
    private var queue: [Job] = []
    private var queueHead = 0
    private var delayed: [(due: UInt64, job: Job)] = []
    private var nextRelay = 0
    private var sealed: [String] = []
    private let begin: UInt64
    private var normalScheduled = 0
    private var hotScheduled = 0
    private var abandoned = 0
    /// The last registration number given.
    private var registrations: Int
    private var ticker: LoopTimer?
    private var finished = false

    init(_ settings: Settings, loop: EventLoop, finish: @escaping @Sendable (Records) -> Void) {
        self.settings = settings
        self.loop = loop
        self.finish = finish
        random = SoakRandom(seed: settings.seed ^ 0x5eed)
        idle = Array(repeating: [], count: settings.relays.count)
        inRotation = Array(repeating: true, count: settings.relays.count)
        begin = settings.begin
        registrations = settings.phones - 1
        // Sealed bytes are opaque to the relay: a few random ones serve every push.
        sealed = (0..<16).map { _ in Base64.encode(SecureRandom.bytes(count: PushRequest.sealedByteCount)) }
        for index in 0..<settings.phones {
            let dead = index >= settings.phones - settings.deadPhones
            phones.append(
                Phone(
                    token: token(dead: dead), thread: Hex.encode(SecureRandom.bytes(count: 32)),
                    hot: index < settings.hotPhones, dead: dead, registration: index))
            identifiers.append(phones[index].token)
            identifiers.append(phones[index].thread)
        }
    }

    private func token(dead: Bool) -> String {
        while true {
            let token = Hex.encode(SecureRandom.bytes(count: 32))
            if dead { return settings.deadPrefix + token.dropFirst(settings.deadPrefix.count) }
            if !token.hasPrefix(settings.deadPrefix) { return token }
        }
    }

    func start() throws(LoadError) {
        for relay in settings.relays.indices { try open(relay: relay) }
        let ticker = LoopTimer(on: loop) { [self] in tick() }
        self.ticker = ticker
        ticker.schedule(afterMilliseconds: 5)
    }

    /// Takes a relay out of rotation (its idle connections closed, its busy ones closed once answered) or puts it
    /// back (with fresh connections), as a load balancer does around a restart.
    func setInRotation(_ relay: Int, _ on: Bool) {
        guard !finished, inRotation[relay] != on else { return }
        inRotation[relay] = on
        if on {
            do throws(LoadError) { try open(relay: relay) } catch { LoadCommand.write("soak: \(error.reason)", to: 2) }
        } else {
            for index in idle[relay] {
                pool[index]?.close()
                pool[index] = nil
            }
            idle[relay] = []
        }
    }

    private func seconds(_ instant: UInt64) -> Double { Double(Int64(instant) - Int64(begin)) / 1e9 }

    private func open(relay: Int) throws(LoadError) {
        for _ in 0..<settings.connectionsPerRelay {
            let index = pool.firstIndex { $0 == nil } ?? pool.count
            if index == pool.count {
                pool.append(nil)
                relayOf.append(relay)
                inFlight.append(nil)
            }
            relayOf[index] = relay
            pool[index] = try ClientConnection.open(index, to: settings.relays[relay].address, on: loop, owner: self)
        }
    }

    private func reopen(_ index: Int, after milliseconds: UInt64) {
        pool[index] = nil
        let relay = relayOf[index]
        guard inRotation[relay], !finished else { return }
        let retry = LoopTimer(on: loop) { [self] in
            guard !finished, inRotation[relay], pool[index] == nil, relayOf[index] == relay else { return }
            do throws(LoadError) {
                pool[index] = try ClientConnection.open(
                    index, to: settings.relays[relay].address, on: loop, owner: self)
            } catch {
                LoadCommand.write("soak: \(error.reason)", to: 2)
            }
        }
        retry.schedule(afterMilliseconds: milliseconds)
        oneShots.append(retry)
    }

    private var oneShots: [LoopTimer] = []

    // MARK: - The schedule of new pushes, resends and give-ups

    private func tick() {
        guard !finished else { return }
        let now = MonotonicClock.now()
        let elapsed = seconds(now)
        oneShots.removeAll { timer in
            if timer.isScheduled { return false }
            timer.close()
            return true
        }
        if elapsed < settings.seconds {
            let hotTotal = Double(settings.hotPhones) * settings.hotRate
            let normalRate = max(0, settings.rate - hotTotal)
            while Double(normalScheduled) < normalRate * elapsed {
                normalScheduled += 1
                let normal = settings.hotPhones..<(settings.phones)
                newPush(phone: normal.lowerBound + Int(random.next() % UInt64(normal.count)), at: now)
            }
            while settings.hotPhones > 0 && Double(hotScheduled) < hotTotal * elapsed {
                newPush(phone: hotScheduled % settings.hotPhones, at: now)
                hotScheduled += 1
            }
        }
        if !delayed.isEmpty {
            var waiting: [(due: UInt64, job: Job)] = []
            for item in delayed {
                if item.due <= now { queue.append(item.job) } else { waiting.append(item) }
            }
            delayed = waiting
        }
        for index in inFlight.indices {
            guard let flight = inFlight[index], seconds(now) - seconds(flight.sent) > settings.clientTimeout else {
                continue
            }
            inFlight[index] = nil
            record(flight, relay: relayOf[index], at: now, ending: .timedOut)
            pool[index]?.close()
            failed(flight.job, at: now)
            reopen(index, after: 10)
        }
        dispatch()
        let settled =
            elapsed >= settings.seconds && queueHead == queue.count && delayed.isEmpty
            && !inFlight.contains { $0 != nil }
        if settled || elapsed >= settings.seconds + settings.settle {
            end(at: now)
            return
        }
        ticker?.schedule(afterMilliseconds: 5)
    }

    private func newPush(phone: Int, at now: UInt64) {
        let id = Hex.encode(SecureRandom.bytes(count: 32))
        pushes.append(Push(phone: phone, id: id, created: now))
        identifiers.append(id)
        enqueue(pushes.count - 1)
    }

    /// Queues a push, or parks it on its phone until the phone has a grant.
    private func enqueue(_ push: Int) {
        let phone = pushes[push].phone
        if phones[phone].grant == nil {
            phones[phone].waiting.append(push)
            if !phones[phone].minting {
                phones[phone].minting = true
                queue.append(.grant(phone))
            }
        } else {
            queue.append(.push(push))
        }
    }

    private func dispatch() {
        while queueHead < queue.count {
            guard let index = idleConnection() else { break }
            let job = queue[queueHead]
            queueHead += 1
            send(job, on: index)
        }
        if queueHead > 4096 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
    }

    private func idleConnection() -> Int? {
        for offset in 0..<settings.relays.count {
            let relay = (nextRelay + offset) % settings.relays.count
            guard inRotation[relay], !idle[relay].isEmpty else { continue }
            nextRelay = (relay + 1) % settings.relays.count
            return idle[relay].removeFirst()
        }
        return nil
    }

    private func send(_ job: Job, on index: Int) {
        let relay = relayOf[index]
        let body: String
        let path: String
        switch job {
        case .push(let number):
            let push = pushes[number]
            let phone = phones[push.phone]
            guard let grant = phone.grant else {
                enqueue(number)
                idle[relay].append(index)
                return
            }
            pushes[number].sends += 1
            path = "/v1/push"
            body =
                #"{"grant":"\#(grant)","sealed":"\#(sealed[number % sealed.count])","id":"\#(push.id)","#
                + #""thread":"\#(phone.thread)"}"#
        case .grant(let phone):
            path = "/v1/grant"
            body = #"{"token":"\#(phones[phone].token)","environment":"sandbox"}"#
        }
        let now = MonotonicClock.now()
        let phone =
            switch job {
            case .push(let number): pushes[number].phone
            case .grant(let phone): phone
            }
        inFlight[index] = InFlight(job: job, sent: now, registration: phones[phone].registration)
        pool[index]?.send(HTTPRequestBytes.post(path: path, host: settings.relays[relay].host, body: Array(body.utf8)))
    }

    private func record(
        _ flight: InFlight, relay: Int, at now: UInt64, ending: SoakAttempt.Ending, status: Int = 0,
        error: String? = nil, limit: String? = nil, apnsID: String? = nil, apnsReason: String? = nil,
        retryAfter: Int? = nil
    ) {
        var attempt = SoakAttempt(
            route: .push, push: -1, phone: flight.registration, relay: relay, sent: seconds(flight.sent),
            ended: seconds(now), ending: ending, status: status, error: error, limit: limit, apnsID: apnsID,
            apnsReason: apnsReason, retryAfter: retryAfter)
        switch flight.job {
        case .push(let number): attempt.push = number
        case .grant: attempt.route = .grant
        }
        attempts.append(attempt)
    }

    /// A request with no answer (its connection ended, or it timed out): for a push, as 502 (it may have been
    /// delivered); a grant is asked for again.
    private func failed(_ job: Job, at now: UInt64) {
        switch job {
        case .push(let number): unknownFate(number, at: now)
        case .grant(let phone): later(.grant(phone), seconds: 1, from: now)
        }
    }

    private func later(_ job: Job, seconds: Double, from now: UInt64) {
        delayed.append((now + UInt64(seconds * 1e9), job))
    }

    private func unknownFate(_ number: Int, at now: UInt64) {
        pushes[number].unknownFates += 1
        let fates = pushes[number].unknownFates
        guard fates <= 3 else { return abandon(number) }
        later(.push(number), seconds: Double(1 << (fates - 1)), from: now)
    }

    private func abandon(_ number: Int) {
        guard !pushes[number].done else { return }
        pushes[number].done = true
        abandoned += 1
    }

    // MARK: - Answers

    func clientDidConnect(_ client: ClientConnection) {
        guard !finished, pool[client.index] === client else { return }
        idle[relayOf[client.index]].append(client.index)
        dispatch()
    }

    func client(_ client: ClientConnection, didFailToConnect error: LoopError) {
        guard !finished, pool[client.index] === client else { return }
        reopen(client.index, after: 250)
    }

    func clientDidEnd(_ client: ClientConnection) {
        guard !finished, pool[client.index] === client else { return }
        let index = client.index
        let now = MonotonicClock.now()
        idle[relayOf[index]].removeAll { $0 == index }
        if let flight = inFlight[index] {
            inFlight[index] = nil
            record(flight, relay: relayOf[index], at: now, ending: .closed)
            failed(flight.job, at: now)
        }
        reopen(index, after: 10)
    }

    func client(_ client: ClientConnection, didReceive status: Int, body: UnsafeRawBufferPointer, at instant: UInt64) {
        guard !finished, pool[client.index] === client, let flight = inFlight[client.index] else { return }
        let index = client.index
        let relay = relayOf[index]
        inFlight[index] = nil
        let text = String(decoding: body, as: UTF8.self)
        let error = Self.value("error", in: text)
        let limit = Self.value("limit", in: text)
        record(
            flight, relay: relay, at: instant, ending: .answered, status: status, error: error, limit: limit,
            apnsID: Self.value("apns_id", in: text), apnsReason: Self.apnsReason(Self.value("detail", in: text)),
            retryAfter: client.retryAfter)
        let wait = Double(max(1, client.retryAfter ?? 1))
        switch flight.job {
        case .grant(let phone):
            if status == 200, let grant = Self.value("grant", in: text) {
                phones[phone].grant = grant
                phones[phone].minting = false
                identifiers.append(grant)
                for push in phones[phone].waiting { queue.append(.push(push)) }
                phones[phone].waiting = []
            } else {
                later(.grant(phone), seconds: wait, from: instant)
            }
        case .push(let number):
            let phone = pushes[number].phone
            switch status {
            case 200: pushes[number].done = true
            case 401:
                // A grant that no longer opens (its key was rotated out): a new grant, then the same push.
                if phones[phone].grant != nil {
                    phones[phone].grant = nil
                }
                enqueue(number)
            case 410:
                pushes[number].done = true
                dropRegistration(phone)
            case 429, 503:
                if seconds(instant) - seconds(pushes[number].created) + wait > settings.staleAfter {
                    abandon(number)
                } else {
                    later(.push(number), seconds: wait, from: instant)
                }
            case 502: unknownFate(number, at: instant)
            default: abandon(number)
            }
        }
        if inRotation[relay] {
            idle[relay].append(index)
        } else {
            client.close()
            pool[index] = nil
        }
        dispatch()
    }

    /// APNs will never deliver to this token: the channel forgets it; the phone registers again with a new token.
    private func dropRegistration(_ phone: Int) {
        for push in phones[phone].waiting { abandon(push) }
        phones[phone].waiting = []
        phones[phone].grant = nil
        phones[phone].minting = false
        phones[phone].token = token(dead: phones[phone].dead)
        registrations += 1
        phones[phone].registration = registrations
        identifiers.append(phones[phone].token)
    }

    private func end(at now: UInt64) {
        finished = true
        ticker?.close()
        for timer in oneShots { timer.close() }
        for client in pool { client?.close() }
        for (index, flight) in inFlight.enumerated() {
            if let flight { record(flight, relay: relayOf[index], at: now, ending: .timedOut) }
        }
        abandoned += pushes.count { !$0.done }
        finish(
            Records(
                attempts: attempts, ids: pushes.map(\.id), identifiers: identifiers, abandoned: abandoned,
                scheduled: pushes.count, elapsed: seconds(now)))
    }

    /// The string value of `"key":"..."` in a JSON body (the relay's answers hold no escapes in these values).
    /// The APNs reason a 502's detail names (`APNs refused the push (REASON): it was not delivered`), if it names one.
    static func apnsReason(_ detail: String?) -> String? {
        let prefix = "APNs refused the push ("
        guard let detail, detail.hasPrefix(prefix), let end = detail.firstIndex(of: ")") else { return nil }
        return String(detail[detail.index(detail.startIndex, offsetBy: prefix.count)..<end])
    }

    static func value(_ key: String, in body: String) -> String? {
        guard let range = body.range(of: "\"\(key)\":\"") else { return nil }
        let rest = body[range.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return String(rest[..<end])
    }
}
