import Foundation
import HTTP2Client
import RelayTestSupport
import Synchronization
import Testing

@Suite("HTTP2Client against the simulator as a plain HTTP/2 server, and broken servers")
struct HTTP2ClientTests {
    let pki = TestPKI.shared

    private func client(
        _ origin: String, caFile: String? = TestPKI.shared.caFile, maxConnections: Int = 2,
        connectTimeout: Duration = .seconds(5)
    ) throws -> HTTP2Client {
        try HTTP2Client(
            configuration: HTTP2ClientConfiguration(
                origin: origin, caFile: caFile, maxConnections: maxConnections, connectTimeout: connectTimeout))
    }

    @Test func postRoundTripCarriesStatusHeadersAndBody() async throws {
        let server = try TestHTTP2Server()
        let client = try client(server.origin)
        defer { client.shutdown() }
        let body = Array("{\"aps\":{\"alert\":\"hello\"}}".utf8)
        let request = HTTP2Request(
            method: "POST", path: "/3/device/abc", headers: [("apns-topic", "app.test"), ("apns-priority", "10")],
            body: body)
        let response = try await client.send(request).get()
        #expect(response.status == 200)
        #expect(response.body == body)
        #expect(response[header: "Server"] == TestHTTP2Server.name)
        #expect(response.headers.allSatisfy { $0.name == $0.name.lowercased() })
    }

    @Test func getServesFilesAndMissingOnesAre404() async throws {
        let server = try TestHTTP2Server(files: ["hello.txt": "hello, world\n"])
        let client = try client(server.origin)
        defer { client.shutdown() }
        let found = try await client.send(HTTP2Request(method: "GET", path: "/hello.txt")).get()
        #expect(found.status == 200)
        #expect(String(decoding: found.body, as: UTF8.self) == "hello, world\n")
        let missing = try await client.send(HTTP2Request(method: "GET", path: "/missing")).get()
        #expect(missing.status == 404)
    }

    /// One connection carries requests of every shape in turn: each must go out as itself, whatever came before.
    @Test func requestsOfEveryShapeInTurnOnOneConnectionEachGoOutAsThemselves() async throws {
        let server = try TestHTTP2Server(files: ["hello.txt": "hello, world\n"])
        let client = try client(server.origin, maxConnections: 1)
        defer { client.shutdown() }
        let large = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        for round in 0..<3 {
            let echoed = try await client.send(HTTP2Request(method: "POST", path: "/echo", body: large)).get()
            #expect(echoed.status == 200)
            #expect(echoed.body == large)
            let small = Array("round \(round)".utf8)
            let echoedSmall = try await client.send(HTTP2Request(method: "POST", path: "/echo", body: small)).get()
            #expect(echoedSmall.body == small)
            let file = try await client.send(HTTP2Request(method: "GET", path: "/hello.txt")).get()
            #expect(file.status == 200)
            #expect(String(decoding: file.body, as: UTF8.self) == "hello, world\n")
            let head = try await client.send(HTTP2Request(method: "HEAD", path: "/hello.txt")).get()
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            let empty = try await client.send(HTTP2Request(method: "POST", path: "/echo")).get()
            #expect(empty.status == 200)
            #expect(empty.body.isEmpty)
        }
        #expect(client.statistics.connectionsOpened == 1)
    }

    @Test func hundredsOfConcurrentRequestsShareAtMostMaxConnections() async throws {
        let server = try TestHTTP2Server()
        let client = try client(server.origin, maxConnections: 2)
        defer { client.shutdown() }
        let count = 600
        let statuses = await withTaskGroup(of: (Int, Int, Bool).self) { group in
            for i in 0..<count {
                group.addTask {
                    let body = Array("request \(i) ".utf8) + [UInt8](repeating: UInt8(i % 256), count: 3500)
                    let result = await client.send(HTTP2Request(path: "/push/\(i)", body: body))
                    guard case .success(let response) = result else { return (i, -1, false) }
                    return (i, response.status, response.body == body)
                }
            }
            var all: [(Int, Int, Bool)] = []
            for await entry in group { all.append(entry) }
            return all
        }
        #expect(statuses.count == count)
        #expect(statuses.allSatisfy { $0.1 == 200 && $0.2 })
        let statistics = client.statistics
        #expect(statistics.connectionsOpened <= 2)
        #expect(statistics.connectionsReplaced == 0)
        #expect(statistics.retries == 0)
        #expect(statistics.requestsInFlight == 0)
        #expect(server.establishedConnections <= 2)
        #expect(server.establishedConnections == statistics.connectionsOpen)
    }

    @Test func serverStreamLimitBelowOursStillCompletesEverything() async throws {
        let server = try TestHTTP2Server(maxConcurrentStreams: 5)
        let client = try client(server.origin, maxConnections: 1)
        defer { client.shutdown() }
        let results = await withTaskGroup(of: Int.self) { group in
            for i in 0..<100 {
                group.addTask {
                    (try? await client.send(HTTP2Request(path: "/\(i)", body: [1, 2, 3])).get().status) ?? -1
                }
            }
            var statuses: [Int] = []
            for await status in group { statuses.append(status) }
            return statuses
        }
        #expect(results.count == 100 && results.allSatisfy { $0 == 200 })
        #expect(client.statistics.connectionsOpened == 1)
        #expect(server.establishedConnections == 1)
        #expect(server.simulator.statistics.maxConcurrentStreamsSeen <= 5)
    }

    @Test func untrustedCertificateFailsWithTLSNotProcessed() async throws {
        let server = try TestHTTP2Server()
        let client = try client(server.origin, caFile: pki.otherCAFile)
        defer { client.shutdown() }
        let result = await client.send(HTTP2Request(path: "/x", body: [1]))
        let error = try #require(result.failure)
        #expect(error.code == .tls)
        #expect(!error.mayHaveBeenProcessed)
    }

    /// The name in the origin is what the certificate must carry (and what SNI sends): `localhost`
    /// also resolves to ::1, where nothing listens, so the client goes on to 127.0.0.1.
    @Test func aHostNameIsVerifiedAgainstTheCertificate() async throws {
        let server = try TestHTTP2Server()
        let client = try client("https://localhost:\(server.port)")
        defer { client.shutdown() }
        #expect(try await client.send(HTTP2Request(path: "/x", body: [1])).get().status == 200)
    }

    @Test func aCertificateForAnotherNameFailsWithTLSNotProcessed() async throws {
        // The chain verifies against the CAs the client trusts here: only the name can fail.
        let verify = try await Tool.run(
            "/usr/bin/openssl", ["verify", "-CAfile", pki.bothCAsFile, pki.elsewhereCertificate])
        #expect(verify.status == 0, "\(verify.errors)")
        let server = try TestHTTP2Server(key: pki.elsewhereKey, certificate: pki.elsewhereCertificate)
        for origin in [server.origin, "https://localhost:\(server.port)"] {
            let client = try client(origin, caFile: pki.bothCAsFile)
            defer { client.shutdown() }
            let error = try #require(await client.send(HTTP2Request(path: "/x", body: [1])).failure)
            #expect(error.code == .tls, "\(origin): \(error)")
            #expect(!error.mayHaveBeenProcessed)
        }
    }

    /// Operators see the client's thread by name (`top -H`, /proc/<pid>/task/*/comm): a standalone
    /// client's connections live on an event loop of its own, whose thread is `h2-client`.
    @Test func theClientsThreadIsNamed() async throws {
        let server = try TestHTTP2Server()
        let client = try client(server.origin, maxConnections: 1)
        defer { client.shutdown() }
        #expect(try await client.send(HTTP2Request(path: "/x", body: [1])).get().status == 200)
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")
        let names = tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
        #expect(names.contains { $0.hasPrefix("h2-client") })
    }

    @Test func nothingListeningFailsWithConnectFailed() async throws {
        let client = try client("https://127.0.0.1:\(try freePort())")
        defer { client.shutdown() }
        let error = try #require(await client.send(HTTP2Request(path: "/x", body: [1])).failure)
        #expect(error.code == .connectFailed)
        #expect(!error.mayHaveBeenProcessed)
        #expect(client.statistics.retries == 1)
    }

    @Test func unresolvableHostFailsWithConnectFailed() async throws {
        let client = try client("https://nonexistent.invalid", caFile: nil)
        defer { client.shutdown() }
        let error = try #require(await client.send(HTTP2Request(path: "/x", body: [1])).failure)
        #expect(error.code == .connectFailed)
        #expect(!error.mayHaveBeenProcessed)
    }

    @Test func silentServerTimesOutAtTheDeadline() async throws {
        let server = try SilentServer()
        let client = try client(server.origin)
        defer { client.shutdown() }
        let started = ContinuousClock.now
        let (result, ended) = await sendTimed(client, HTTP2Request(path: "/x", body: [1], timeout: .milliseconds(700)))
        let error = try #require(result.failure)
        let elapsed = ended - started
        #expect(error.code == .timeout)
        #expect(!error.mayHaveBeenProcessed)  // the TLS handshake never finished: nothing was sent
        #expect(elapsed >= .milliseconds(650))
        #expect(elapsed < .milliseconds(700) + .seconds(1))
    }

    @Test func connectTimeoutShorterThanDeadlineIsConnectFailed() async throws {
        let server = try SilentServer()
        let client = try client(server.origin, connectTimeout: .milliseconds(300))
        defer { client.shutdown() }
        let error = try #require(await client.send(HTTP2Request(path: "/x", timeout: .seconds(5))).failure)
        #expect(error.code == .connectFailed)
        #expect(!error.mayHaveBeenProcessed)
    }

    @Test func queuedRequestsTimeOutWhileWaitingForAConnection() async throws {
        let server = try SilentServer()
        let client = try client(server.origin, maxConnections: 1)
        defer { client.shutdown() }
        let started = ContinuousClock.now
        async let first = client.send(HTTP2Request(path: "/first", timeout: .seconds(3)))
        let (second, ended) = await sendTimed(client, HTTP2Request(path: "/second", timeout: .milliseconds(400)))
        let secondError = try #require(second.failure)
        #expect(secondError.code == .timeout)
        #expect(!secondError.mayHaveBeenProcessed)
        #expect(ended - started < .milliseconds(400) + .seconds(1))
        #expect(try #require(await first.failure).code == .timeout)
    }

    @Test func shutdownFailsInFlightAndQueuedRequests() async throws {
        let server = try SilentServer()
        let client = try client(server.origin, maxConnections: 1)
        let ended = Mutex<[HTTP2ClientError]>([])
        let done = AsyncStream.makeStream(of: Void.self)
        for i in 0..<20 {
            client.send(HTTP2Request(path: "/\(i)", timeout: .seconds(30))) { result in
                let count = ended.withLock {
                    $0.append(result.failure!)
                    return $0.count
                }
                if count == 20 { done.continuation.finish() }
            }
        }
        #expect(client.statistics.requestsInFlight == 20)
        let started = ContinuousClock.now
        client.shutdown()
        for await _ in done.stream {}
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(ended.withLock { $0.count == 20 && $0.allSatisfy { $0.code == .shutdown } })
        #expect(client.statistics.requestsInFlight == 0)
        let late = try #require(await client.send(HTTP2Request(path: "/late")).failure)
        #expect(late.code == .shutdown)
    }

    @Test func malformedRequestsFailWithoutBeingSent() async throws {
        let client = try client("https://127.0.0.1:1")
        defer { client.shutdown() }
        let bad = [
            HTTP2Request(path: "no-slash"),
            HTTP2Request(method: "PO ST", path: "/"),
            HTTP2Request(path: "/", headers: [("x-evil", "a\r\nb: c")]),
            HTTP2Request(path: "/", headers: [(":path", "/other")]),
            HTTP2Request(path: "/", timeout: .zero),
        ]
        for request in bad {
            let error = try #require(await client.send(request).failure)
            #expect(error.code == .invalidRequest)
        }
        #expect(client.statistics.connectionsOpened == 0)
    }

    @Test(arguments: [
        HTTP2ClientConfiguration(origin: "http://127.0.0.1:1"),
        HTTP2ClientConfiguration(origin: "https://127.0.0.1:1/path"),
        HTTP2ClientConfiguration(origin: "https://127.0.0.1:1", maxConnections: 0),
        HTTP2ClientConfiguration(origin: "https://127.0.0.1:1", caFile: "/nonexistent/ca.pem"),
    ])
    func unusableConfigurationsAreRejected(_ configuration: HTTP2ClientConfiguration) {
        #expect(throws: HTTP2ClientError(.invalidConfiguration, "", mayHaveBeenProcessed: false)) {
            try HTTP2Client(configuration: configuration)
        }
        #expect(throws: HTTP2ClientError(.invalidConfiguration, "", mayHaveBeenProcessed: false)) {
            try HTTP2Client.check(configuration)
        }
    }
}

/// Sends and returns the result with the instant the completion ran (on the client's thread),
/// so that a busy test scheduler does not count against the client.
func sendTimed(
    _ client: HTTP2Client, _ request: HTTP2Request
) async -> (Result<HTTP2Response, HTTP2ClientError>, ContinuousClock.Instant) {
    await withCheckedContinuation { continuation in
        client.send(request) { continuation.resume(returning: ($0, ContinuousClock.now)) }
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
