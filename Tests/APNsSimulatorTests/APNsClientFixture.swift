import APNsSimulator
import Foundation
import HTTP2Client
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

    static func randomToken() -> String {
        TestHex.random()
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
    /// cooperative pool is with other tests.
    func burst(
        _ count: Int, tokens: [String]? = nil, timeout: Duration = .seconds(10), spread: Duration = .zero
    ) async -> [Outcome] {
        let results = Mutex([Outcome?](repeating: nil, count: count))
        let group = DispatchGroup()
        let spreadNanoseconds =
            spread.components.seconds * 1_000_000_000 + spread.components.attoseconds / 1_000_000_000
        for index in 0..<count {
            group.enter()
            let token = tokens?[index] ?? Self.randomToken()
            let id = "push-\(index)-\(UUID().uuidString.prefix(8))"
            let request = request(token: token, id: id, timeout: timeout)
            let pause = spreadNanoseconds > 0 ? Int.random(in: 0...Int(spreadNanoseconds)) : 0
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(pause)) { [client] in
                let start = ContinuousClock.now
                client.send(request) { result in
                    let took = start.duration(to: .now)
                    results.withLock { $0[index] = (id, result, took) }
                    group.leave()
                }
            }
        }
        await withCheckedContinuation { continuation in
            group.notify(queue: .global()) { continuation.resume() }
        }
        return results.withLock { $0.map { $0! } }
    }

    /// `total` pushes from `clients` senders, each sending its next push from the completion of its
    /// last (a closed loop, on the client's threads); returns every push's id and result.
    func closedLoop(total: Int, clients: Int) async -> [(id: String, result: Result<HTTP2Response, HTTP2ClientError>)] {
        let state = Mutex((issued: 0, results: [(id: String, result: Result<HTTP2Response, HTTP2ClientError>)]()))
        let group = DispatchGroup()
        @Sendable func next() {
            let index = state.withLock { state -> Int? in
                guard state.issued < total else { return nil }
                state.issued += 1
                return state.issued
            }
            guard let index else {
                group.leave()
                return
            }
            let id = "loop-\(index)-\(UUID().uuidString.prefix(8))"
            client.send(request(token: Self.randomToken(), id: id)) { result in
                state.withLock { $0.results.append((id, result)) }
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
        return state.withLock { $0.results }
    }
}
