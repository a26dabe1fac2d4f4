import APNsSimulator
import Foundation
import HTTP2Client

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
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
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

    /// Sends `count` pushes at once (`tokens[i]` if given) and returns each one's result and id.
    func burst(
        _ count: Int, tokens: [String]? = nil, timeout: Duration = .seconds(10), spread: Duration = .zero
    ) async -> [(
        id: String, result: Result<HTTP2Response, HTTP2ClientError>
    )] {
        await withTaskGroup(of: (Int, String, Result<HTTP2Response, HTTP2ClientError>).self) { group in
            for index in 0..<count {
                let token = tokens?[index] ?? Self.randomToken()
                group.addTask {
                    if spread > .zero {
                        let nanoseconds = Int64.random(
                            in: 0...spread.components.attoseconds / 1_000_000_000 + spread.components.seconds
                                * 1_000_000_000)
                        try? await Task.sleep(for: .nanoseconds(nanoseconds))
                    }
                    let id = "push-\(index)-\(UUID().uuidString.prefix(8))"
                    return (index, id, await push(token: token, id: id, timeout: timeout))
                }
            }
            var results = [(id: String, result: Result<HTTP2Response, HTTP2ClientError>)?](repeating: nil, count: count)
            for await (index, id, result) in group { results[index] = (id, result) }
            return results.map { $0! }
        }
    }
}

extension APNsClientFixture {
    /// Like `burst`, with how long each push took to be answered.
    func timedBurst(_ count: Int, timeout: Duration, spread: Duration) async -> [(
        result: Result<HTTP2Response, HTTP2ClientError>, took: Duration
    )] {
        await withTaskGroup(of: (Result<HTTP2Response, HTTP2ClientError>, Duration).self) { group in
            for _ in 0..<count {
                group.addTask {
                    let wait = Int64.random(
                        in:
                            0...Int64(
                                spread.components.seconds * 1000 + spread.components.attoseconds / 1_000_000_000_000_000
                            ))
                    try? await Task.sleep(for: .milliseconds(wait))
                    let start = ContinuousClock.now
                    let result = await push(timeout: timeout)
                    return (result, start.duration(to: .now))
                }
            }
            var all: [(result: Result<HTTP2Response, HTTP2ClientError>, took: Duration)] = []
            for await (result, took) in group { all.append((result, took)) }
            return all
        }
    }
}
