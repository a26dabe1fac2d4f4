import APNsSimulator
import Foundation
import Testing

@Suite("Faults")
struct FaultTests {
    @Test(
        "an injected status is answered with its reason",
        arguments: [
            (429, "TooManyRequests"), (500, "InternalServerError"), (503, "ServiceUnavailable"),
            (403, "ExpiredProviderToken"), (400, "BadDeviceToken"),
        ])
    func injectedStatus(status: Int, reason expected: String) async throws {
        let fixture = try SimulatorFixture()
        fixture.simulator.inject(.status(status, reason: expected))
        let result = try await fixture.curl(headers: fixture.headers(token: try fixture.providerToken()))
        #expect(result.status == status)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any])
        #expect(body["reason"] as? String == expected)
        #expect(body["timestamp"] == nil)
        #expect(result.headers["apns-id"] != nil)
        #expect(fixture.simulator.delivered.isEmpty)
    }

    @Test("410 Unregistered carries a timestamp in milliseconds from the simulator's clock")
    func unregistered() async throws {
        let fixture = try SimulatorFixture()
        // Away from the real time, so that only the simulator's own clock gives this timestamp.
        fixture.clock.advance(seconds: 1_234)
        fixture.simulator.inject(.status(410, reason: "Unregistered"))
        let result = try await fixture.curl(headers: fixture.headers(token: try fixture.providerToken()))
        #expect(result.status == 410)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: Any])
        #expect(body["reason"] as? String == "Unregistered")
        let timestamp = try #require(body["timestamp"] as? Int64)
        #expect(timestamp == Int64(fixture.clock.unixSeconds) * 1000)
        #expect(fixture.simulator.delivered.isEmpty)
    }

    @Test("queued faults apply in order to the next valid requests only, then requests succeed")
    func queueOrder() async throws {
        let fixture = try SimulatorFixture()
        fixture.simulator.inject(.status(500, reason: "InternalServerError"), count: 2)
        fixture.simulator.inject(.status(503, reason: "ServiceUnavailable"))
        let token = try fixture.providerToken()
        let url = fixture.url()
        let (statuses, bodies) = try await fixture.curlSequence([
            (url, fixture.headers(token: token, extra: ["apns-topic: com.not.allowed"])),
            (url, fixture.headers(token: token)),
            (url, fixture.headers(token: token)),
            (url, fixture.headers(token: token)),
            (url, fixture.headers(token: token)),
        ])
        #expect(statuses == [400, 500, 500, 503, 200])
        #expect(try reason(of: bodies[0]) == "TopicDisallowed")
        #expect(fixture.simulator.delivered.count == 1)
    }

    @Test("a default fault applies until cleared; queued faults come first")
    func defaultFault() async throws {
        let fixture = try SimulatorFixture()
        fixture.simulator.setDefaultFault(.status(429, reason: "TooManyRequests"))
        fixture.simulator.inject(.status(410, reason: "Unregistered"))
        let token = try fixture.providerToken()
        let url = fixture.url()
        let (statuses, _) = try await fixture.curlSequence([
            (url, fixture.headers(token: token)), (url, fixture.headers(token: token)),
            (url, fixture.headers(token: token)),
        ])
        #expect(statuses == [410, 429, 429])
        fixture.simulator.setDefaultFault(nil)
        #expect(try await fixture.curl(headers: fixture.headers(token: token)).status == 200)
    }

    @Test("stall: the stream is never answered and the client times out")
    func stall() async throws {
        let fixture = try SimulatorFixture()
        fixture.simulator.inject(.stall)
        let result = try await fixture.curl(headers: fixture.headers(token: try fixture.providerToken()), maxTime: 1)
        #expect(result.exitCode == 28)  // CURLE_OPERATION_TIMEDOUT
        #expect(fixture.simulator.delivered.isEmpty)
        #expect(fixture.simulator.statistics.requests == 1)
    }

    @Test("delay: delivered and answered 200 after the delay")
    func delay() async throws {
        let fixture = try SimulatorFixture()
        fixture.simulator.inject(.delay(.milliseconds(400)))
        let start = ContinuousClock.now
        let result = try await fixture.curl(headers: fixture.headers(token: try fixture.providerToken()))
        let elapsed = ContinuousClock.now - start
        #expect(result.status == 200)
        // Wall-clock: the delay runs on the simulator loop's real timer; a lower bound only (never flaky).
        #expect(elapsed >= .milliseconds(400))
        #expect(fixture.simulator.delivered.count == 1)
    }

    @Test("goaway: GOAWAY marks the stream unprocessed and the connection closes")
    func goaway() async throws {
        let fixture = try SimulatorFixture()
        let token = try fixture.providerToken()
        // nghttp sends one request; its stream is above the GOAWAY's last-stream-id.
        fixture.simulator.inject(.goaway)
        let result = try await nghttp(fixture, token: token)
        #expect(result.stdout.contains("recv GOAWAY frame"))
        #expect(result.stdout.contains("last_stream_id=0, error_code=NO_ERROR"))
        #expect((result.stdout + result.stderr).contains("processed=0"))
        #expect(!result.stdout.contains(":status:"))
        // curl reports the refused request as an HTTP/2 error and does not retry it.
        fixture.simulator.inject(.goaway)
        let curl = try await fixture.curl(headers: fixture.headers(token: token))
        #expect(curl.exitCode == 16)  // CURLE_HTTP2
        #expect(fixture.simulator.delivered.isEmpty)
        #expect(fixture.simulator.statistics.goawaysSent == 2)
    }

    @Test("goaway after earlier requests on the connection: they count, the GOAWAY points at them")
    func goawayAfterRequests() async throws {
        let fixture = try SimulatorFixture()
        let token = try fixture.providerToken()
        fixture.simulator.inject(.status(410, reason: "Unregistered"))
        fixture.simulator.inject(.goaway)
        let url = fixture.url()
        let (statuses, _) = try await fixture.curlSequence([
            (url, fixture.headers(token: token)), (url, fixture.headers(token: token)),
            (url, fixture.headers(token: token)),
        ])
        // 410 on stream 1; GOAWAY(last=1) refuses stream 3; curl reconnects for the third request.
        #expect(statuses.first == 410)
        #expect(statuses.last == 200)
        #expect(fixture.simulator.statistics.goawaysSent == 1)
        #expect(fixture.simulator.statistics.connectionsAccepted == 2)
        #expect(fixture.simulator.delivered.count == 1)
    }

    @Test("resetStream: RST_STREAM with REFUSED_STREAM, nothing delivered")
    func resetStream() async throws {
        let fixture = try SimulatorFixture()
        fixture.simulator.inject(.resetStream)
        let result = try await nghttp(fixture, token: try fixture.providerToken())
        #expect(result.stdout.contains("recv RST_STREAM frame"))
        #expect(result.stdout.contains("error_code=REFUSED_STREAM"))
        #expect(!result.stdout.contains(":status:"))
        #expect(fixture.simulator.delivered.isEmpty)
        #expect(fixture.simulator.statistics.requests == 1)
        #expect(fixture.simulator.statistics.streamsRefused == 1)
    }

    @Test("dropConnection: the connection closes without an answer")
    func dropConnection() async throws {
        let fixture = try SimulatorFixture()
        fixture.simulator.inject(.dropConnection)
        let result = try await fixture.curl(headers: fixture.headers(token: try fixture.providerToken()))
        #expect(result.exitCode != 0)
        #expect(result.status == 0)
        #expect(fixture.simulator.delivered.isEmpty)
        #expect(fixture.simulator.statistics.connectionsDropped == 1)
        // The next request gets a new connection and succeeds.
        #expect(try await fixture.curl(headers: fixture.headers(token: try fixture.providerToken())).status == 200)
        #expect(fixture.simulator.statistics.connectionsAccepted == 2)
    }

    @Test("faults do not apply to requests that fail validation")
    func faultsNeedValidRequests() async throws {
        let fixture = try SimulatorFixture()
        fixture.simulator.inject(.dropConnection)
        let bad = try await fixture.curl(
            fixture.url(token: "abc"), headers: fixture.headers(token: try fixture.providerToken()))
        #expect(bad.status == 400)
        let good = try await fixture.curl(headers: fixture.headers(token: try fixture.providerToken()))
        #expect(good.status == 0)
        #expect(good.exitCode != 0)
    }

    private func nghttp(_ fixture: SimulatorFixture, token: String) async throws -> SimulatorFixture.ProcessResult {
        let payloadFile = try fixture.writeFile("payload-\(UUID().uuidString)", SimulatorFixture.payload)
        var arguments = ["-v", "-t", "10", "-d", payloadFile]
        for header in fixture.headers(token: token) { arguments += ["-H", header] }
        arguments.append(fixture.url())
        return try await fixture.run("/usr/bin/nghttp", arguments)
    }
}
