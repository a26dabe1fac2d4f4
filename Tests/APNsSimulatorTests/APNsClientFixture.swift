import APNsSimulator
import Foundation
import HTTP2Client
import MonotonicTime
import RelayTestSupport
import Synchronization

/// The relay's HTTP/2 client set up as the relay sets it up (one stream until an answer other
/// than 403), sending valid pushes to a simulator at `origin`.
struct APNsClientFixture: Sendable {
    let client: HTTP2Client
    let bearer: String

    init(
        simulator: SimulatorFixture, origin: String? = nil, maxConnections: Int = 2,
        pingInterval: Duration = .seconds(60), pingTimeout: Duration = .seconds(10),
        onEvent: (@Sendable (HTTP2ClientEvent) -> Void)? = nil
    ) throws {
        client = try HTTP2Client(
            configuration: HTTP2ClientConfiguration(
                origin: origin ?? simulator.baseURL, caFile: simulator.caFile, maxConnections: maxConnections,
                connectTimeout: .seconds(3), provesConnection: { $0 != 403 }, pingInterval: pingInterval,
                pingTimeout: pingTimeout, onEvent: onEvent))
        bearer = try simulator.providerToken()
    }

    /// A valid push to `token`, its `apns-collapse-id` set to `id` (to find it among deliveries).
    func request(token: String, id: String, timeout: Duration = .seconds(10)) -> HTTP2Request {
        HTTP2Request(
            method: "POST", path: "/3/device/\(token)",
            headers: [
                ("authorization", "bearer \(bearer)"), ("apns-topic", SimulatorFixture.topic),
                ("apns-push-type", "alert"), ("apns-priority", "10"), ("apns-collapse-id", id),
            ],
            body: Array(SimulatorFixture.payload.utf8), timeout: timeout)
    }

    func push(token: String = randomToken(), id: String = UUID().uuidString, timeout: Duration = .seconds(10)) async
        -> Result<HTTP2Response, HTTP2ClientError>
    {
        await client.send(request(token: token, id: id, timeout: timeout))
    }

    typealias Outcome = (id: String, result: Result<HTTP2Response, HTTP2ClientError>, took: Duration)

    /// Sends `count` pushes (`tokens[i]` if given), each after a random pause within `spread`, and
    /// returns each one's id, result and how long its answer took. Driven by the client's callbacks
    /// and Dispatch timers, not by Swift tasks: the timing does not depend on how busy the shared
    /// cooperative pool is with other tests. `observe` sees every outcome as it comes, with how many
    /// came so far (on the client's thread: it must not block, and hands slow work to a queue).
    func burst(
        _ count: Int, tokens: [String]? = nil, timeout: Duration = .seconds(10), spread: Duration = .zero,
        observe: (@Sendable (_ outcome: Outcome, _ answered: Int) -> Void)? = nil
    ) async -> [Outcome] {
        let results = Mutex((outcomes: [Outcome?](repeating: nil, count: count), answered: 0))
        let group = DispatchGroup()
        let spreadNanoseconds = Int64(clamping: spread.nanoseconds)
        for index in 0..<count {
            group.enter()
            let token = tokens?[index] ?? randomToken()
            let id = "push-\(index)-\(UUID().uuidString.prefix(8))"
            let request = request(token: token, id: id, timeout: timeout)
            let pause = spreadNanoseconds > 0 ? Int.random(in: 0...Int(spreadNanoseconds)) : 0
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(pause)) { [client] in
                let start = ContinuousClock.now
                client.send(request) { result in
                    let outcome = (id, result, start.duration(to: .now))
                    let answered = results.withLock {
                        $0.outcomes[index] = outcome
                        $0.answered += 1
                        return $0.answered
                    }
                    observe?(outcome, answered)
                    group.leave()
                }
            }
        }
        await withCheckedContinuation { continuation in
            group.notify(queue: .global()) { continuation.resume() }
        }
        return results.withLock { $0.outcomes.map { $0! } }
    }

    /// Pushes one at a time (each with `timeout`) until one is answered 200 or `limit` has passed since
    /// `since`, then calls `done` with how long after `since` the 200 came (nil if none did). Called and driven
    /// on the caller's thread and the client's callbacks, never the cooperative pool, so a pool busy with other
    /// tests delays neither the first push nor the next.
    func firstSuccess(
        since: ContinuousClock.Instant, within limit: Duration, timeout: Duration,
        then done: @escaping @Sendable (Duration?) -> Void
    ) {
        @Sendable func attempt() {
            client.send(request(token: randomToken(), id: UUID().uuidString, timeout: timeout)) { result in
                let elapsed = since.duration(to: .now)
                if (try? result.get().status) == 200 {
                    done(elapsed)
                } else if elapsed < limit {
                    attempt()
                } else {
                    done(nil)
                }
            }
        }
        attempt()
    }

    /// `total` pushes from `clients` senders, each sending its next push from the completion of its
    /// last (a closed loop, on the client's threads); returns every push's id and result, and the time
    /// from the first push sent to the last answered, measured on the client's threads (a busy
    /// cooperative pool does not count against the client).
    func closedLoop(total: Int, clients: Int) async -> (
        results: [(id: String, result: Result<HTTP2Response, HTTP2ClientError>)], elapsed: Duration
    ) {
        let state = Mutex(
            (
                issued: 0, results: [(id: String, result: Result<HTTP2Response, HTTP2ClientError>)](),
                started: ContinuousClock.Instant?.none, ended: ContinuousClock.now
            ))
        let group = DispatchGroup()
        @Sendable func next() {
            let index = state.withLock { state -> Int? in
                guard state.issued < total else { return nil }
                state.issued += 1
                if state.started == nil { state.started = .now }
                return state.issued
            }
            guard let index else {
                group.leave()
                return
            }
            let id = "loop-\(index)-\(UUID().uuidString.prefix(8))"
            client.send(request(token: randomToken(), id: id)) { result in
                state.withLock {
                    $0.results.append((id, result))
                    $0.ended = .now
                }
                next()
            }
        }
        for _ in 0..<clients {
            group.enter()
            DispatchQueue.global().async { next() }
        }
        await withCheckedContinuation { continuation in
            group.notify(queue: .global()) { continuation.resume() }
        }
        return state.withLock { ($0.results, ($0.started ?? $0.ended).duration(to: $0.ended)) }
    }
}
