import Foundation
import RelayTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// docs/DESIGN.md, "The HTTP front", Caps, as clients of the real binary see them: clients that never hold more
/// connections than the cap per address, opening and closing them as fast as they can, are never refused; over a
/// cap, every request is answered 503 `overloaded` with `Retry-After` and `Connection: close`, never reset, while
/// another address is served.
///
/// The churn runs `DUO_RELAY_CAP_RUNS` times (default 1; each run against a new relay) for `DUO_RELAY_CAP_SECONDS`
/// (default 30): `DUO_RELAY_CAP_RUNS=20 swift test --skip-build --filter ConnectionCapTests` is the repeated run.
@Suite(.serialized) struct ConnectionCapTests {
    static let cap = 16

    static func setting(_ name: String, default value: Int, in range: ClosedRange<Int>) -> Int {
        guard let text = ProcessInfo.processInfo.environment[name], let number = Int(text) else { return value }
        return min(max(number, range.lowerBound), range.upperBound)
    }

    /// What the churn's clients saw.
    struct Churn: Sendable {
        var requests = 0
        var failures: [String] = []
    }

    @Test func clientsThatNeverHoldMoreThanTheCapAreNeverRefused() throws {
        let runs = Self.setting("DUO_RELAY_CAP_RUNS", default: 1, in: 1...100)
        let seconds = Self.setting("DUO_RELAY_CAP_SECONDS", default: 30, in: 1...3600)
        var failedRuns = 0
        for run in 1...runs {
            let relay = try HTTPFrontTests.relay(server: #""max_connections_per_address":\#(Self.cap)"#)
            let churn = try Self.churn(port: relay.port, clients: Self.cap, source: "127.0.0.80", seconds: seconds)
            print(
                "ConnectionCapTests: run \(run) of \(runs): \(Self.cap) clients, \(churn.requests) requests on as "
                    + "many connections in \(seconds) s, \(churn.failures.count) not answered 200")
            if !churn.failures.isEmpty { failedRuns += 1 }
            #expect(churn.failures.isEmpty, "run \(run): \(churn.failures.prefix(5))")
            // Enough connections that the closes and accepts met often: at least 50 a second.
            #expect(churn.requests >= 50 * seconds, "run \(run)")
            #expect(relay.process.isRunning)
        }
        print("ConnectionCapTests: \(runs - failedRuns) of \(runs) runs without a refusal")
    }

    /// `clients` threads, each opening a connection, sending one request, reading its answer and closing, again and
    /// again for `seconds`: every other connection is closed by the client after the answer (a keep-alive answer),
    /// the rest by the relay (`Connection: close`), so that both orders of close and next accept are met.
    static func churn(port: UInt16, clients: Int, source: String, seconds: Int) throws -> Churn {
        let outcome = Mutex(Churn())
        let end = ContinuousClock.now + .seconds(seconds)
        let threads = try (0..<clients).map { client in
            try JoinableThread {
                var requests = 0
                var failures: [String] = []
                // Bounded by the clock and by a count no machine reaches in the time.
                while ContinuousClock.now < end && requests < 10_000_000 {
                    requests += 1
                    let closing = requests % 2 == 0
                    do {
                        let connection = try RawHTTPClient(port: port, source: source, timeoutSeconds: 10)
                        try connection.send(
                            "GET /healthz HTTP/1.1\r\nHost: relay\r\n" + (closing ? "Connection: close\r\n" : "")
                                + "\r\n")
                        let answer = try connection.readResponse()
                        if answer.status != 200 {
                            failures.append("client \(client): \(answer.status) \(answer.text)")
                        } else if closing && !connection.isClosedByPeer(within: 10) {
                            failures.append("client \(client): not closed after Connection: close")
                        }
                    } catch {
                        failures.append("client \(client): \(error)")
                    }
                }
                outcome.withLock {
                    $0.requests += requests
                    $0.failures += failures
                }
            }
        }
        for thread in threads { thread.join() }
        return outcome.withLock { $0 }
    }

    @Test func overTheCapEveryRequestIsAnswered503AndAnotherAddressIsServed() throws {
        let cap = 4
        let relay = try HTTPFrontTests.relay(server: #""max_connections_per_address":\#(cap)"#)
        // Each held connection is answered before the next is made, so that all of them count.
        let held = try (0..<cap).map { _ in
            let client = try RawHTTPClient(port: relay.port, source: "127.0.0.81", timeoutSeconds: 5)
            #expect(try client.request("GET", "/healthz").status == 200)
            return client
        }
        // 40 connections over the cap, all open at once, each with a push.
        let body = Array(#"{"grant":"x","id":"1"}"#.utf8)
        let extra = try (0..<40).map { _ in
            let client = try RawHTTPClient(port: relay.port, source: "127.0.0.81", timeoutSeconds: 5)
            try client.send(RawHTTPClient.encode("POST", "/v1/push", body: body, headers: ["Host": "relay"]))
            return client
        }
        let other = try RawHTTPClient(port: relay.port, source: "127.0.0.82", timeoutSeconds: 5)
        #expect(try other.request("GET", "/healthz").status == 200)
        for client in extra {
            let answer = try client.readResponse()
            HTTPFrontTests.expectJSON(answer, 503, "overloaded")
            #expect(Int(answer.header("retry-after") ?? "") ?? 0 >= 1)
            #expect(answer.header("connection")?.lowercased() == "close")
            #expect(Self.endsWithoutReset(client), "a refused connection was reset")
        }
        // The held connections go on, and once one closes its room is given to the next connection.
        #expect(try held[1].request("GET", "/healthz").status == 200)
        _ = consume held
        let next = try RawHTTPClient(port: relay.port, source: "127.0.0.81", timeoutSeconds: 5)
        #expect(try next.request("GET", "/healthz").status == 200)
        #expect(!relay.standardError.contains("127.0.0.81"))
    }

    /// `/metrics` counts the connections refused at a cap and those counted now: the refusals an operator would
    /// otherwise not see (they are answered by the front, before any endpoint), and none for a client under its cap.
    @Test func theMetricsCountConnectionsRefusedAtACapAndThoseOpen() throws {
        let relay = try RelayProcess(
            config: RelayProcess.config(
                extra: ResilienceTests.generousLimits
                    + #","metrics_listen":"127.0.0.1:0","server":{"max_connections_per_address":2}"#),
            secrets: TestSecrets())
        func counts() throws -> (open: Double?, refused: Double?) {
            let text = try relay.scrapeMetrics()
            return (
                RelayProcess.sample(text, "duo_relay_connections_open"),
                RelayProcess.sample(text, "duo_relay_connections_refused_total")
            )
        }
        let held = try (0..<2).map { _ in
            let client = try RawHTTPClient(port: relay.port, source: "127.0.0.84", timeoutSeconds: 5)
            #expect(try client.request("GET", "/healthz").status == 200)
            return client
        }
        // The metrics listener's own connection counts against its own caps, not these.
        #expect(try counts() == (2, 0))
        for _ in 0..<3 {
            let over = try RawHTTPClient(port: relay.port, source: "127.0.0.84", timeoutSeconds: 5)
            HTTPFrontTests.expectJSON(try over.request("GET", "/healthz"), 503, "overloaded")
        }
        // Counted as each refused connection closes, once its answer is written.
        #expect(
            Poll.until(within: .seconds(10)) { (try? counts()) ?? (nil, nil) == (2, 3) },
            "\(String(describing: try? counts()))")
        _ = consume held
        #expect(Poll.until(within: .seconds(10)) { (try? counts()) ?? (nil, nil) == (0, 3) })
        // A client under its cap again: served, and no refusal more.
        let next = try RawHTTPClient(port: relay.port, source: "127.0.0.84", timeoutSeconds: 5)
        #expect(try next.request("GET", "/healthz").status == 200)
        #expect(try counts() == (1, 3))
    }

    /// A connection over the cap that sends nothing is closed a second after its accept, unanswered.
    @Test func overTheCapASilentConnectionIsClosedAfterASecond() throws {
        let relay = try HTTPFrontTests.relay(server: #""max_connections_per_address":1"#)
        let held = try RawHTTPClient(port: relay.port, source: "127.0.0.83", timeoutSeconds: 5)
        #expect(try held.request("GET", "/healthz").status == 200)
        let silent = try RawHTTPClient(port: relay.port, source: "127.0.0.83", timeoutSeconds: 5)
        let opened = ContinuousClock.now
        #expect(Self.endsWithoutReset(silent))
        let waited = ContinuousClock.now - opened
        // Wall-clock: a separate relay process; bounded around the one second.
        #expect(waited >= .milliseconds(700) && waited < .seconds(4), "\(waited)")
        #expect(try held.request("GET", "/healthz").status == 200)
    }

    /// Whether the relay ends `client` with a FIN (what it sent before is read and dropped), not a reset, within 5 s.
    static func endsWithoutReset(_ client: RawHTTPClient) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        let end = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < end {
            var entry = pollfd(fd: client.descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) >= 0 else { return false }
            guard entry.revents != 0 else { continue }
            let count = chunk.withUnsafeMutableBytes { recv(client.descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 { return true }
            if count < 0 { return false }
        }
        return false
    }
}
