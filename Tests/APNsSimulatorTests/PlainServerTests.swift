import APNsSimulator
import Foundation
import Synchronization
import Testing

/// The simulator as a plain HTTP/2 test server (a responder instead of APNs's checks), its fault plan, and the
/// TCP reset fault: what the APNs client's own tests stand on.
@Suite("The simulator as a plain HTTP/2 server, and its fault plan")
struct PlainServerTests {
    /// Answers 201 with the request's body, its method, path and `x-test` header echoed in headers.
    static func echo(_ request: SimulatorRequest) -> SimulatorResponse {
        (
            status: 201,
            headers: [
                ("x-method", request.method), ("x-path", request.path), ("x-test", request[header: "x-test"] ?? "-"),
                ("x-connection", String(request.connection)),
            ],
            body: request.body
        )
    }

    @Test("the responder answers any method and path, without a provider token, with the whole body")
    func responderAnswersWithoutAPNsChecks() async throws {
        let fixture = try SimulatorFixture(responder: Self.echo)
        // Over APNs's 4 KB payload limit: a plain server keeps every byte.
        let payload = String(repeating: "0123456789", count: 1_000)
        let result = try await fixture.curl(
            fixture.baseURL + "/any/path?x=1", method: "PUT", headers: ["x-test: yes"], payload: payload)
        #expect(result.status == 201)
        #expect(result.body == payload)
        #expect(result.headers["x-method"] == "PUT")
        #expect(result.headers["x-path"] == "/any/path?x=1")
        #expect(result.headers["x-test"] == "yes")
        #expect(result.headers["x-connection"] == "1")
        #expect(fixture.simulator.statistics.requests == 1)
        #expect(fixture.simulator.delivered.isEmpty)
    }

    @Test("a plain server allows its stream limit from the first SETTINGS (no token to present)")
    func plainServerAllowsItsStreamLimitAtOnce() async throws {
        let fixture = try SimulatorFixture(maxConcurrentStreams: 7, responder: Self.echo)
        let result = try await fixture.run(
            "/usr/bin/nghttp", ["-v", "-t", "10", "--no-verify-peer", fixture.baseURL + "/x"])
        #expect(result.stdout.contains("SETTINGS_MAX_CONCURRENT_STREAMS(0x03):7"), "\(result.stdout)")
    }

    @Test("a fault plan sees each request's connection, place and path, and comes before queued faults")
    func faultPlanSeesWhereARequestStands() async throws {
        let fixture = try SimulatorFixture(responder: Self.echo)
        let seen = Mutex<[SimulatorFaultContext]>([])
        fixture.simulator.inject(.status(500, reason: "InternalServerError"))
        fixture.simulator.setFaultPlan { context in
            seen.withLock { $0.append(context) }
            return context.request == 2 ? .status(429, reason: "TooManyRequests") : nil
        }
        let base = fixture.baseURL
        let (statuses, _) = try await fixture.curlSequence([
            (base + "/a", []), (base + "/b", []), (base + "/c", []),
        ])
        // The plan lets the first through to the queue's 500, takes the second, and the third is answered.
        #expect(statuses == [500, 429, 201])
        let contexts = seen.withLock { $0.map { "\($0.connection) \($0.request) \($0.path)" } }
        #expect(contexts == ["1 1 /a", "1 2 /b", "1 3 /c"])
        // Cleared, it chooses nothing more.
        fixture.simulator.setFaultPlan(nil)
        #expect(try await fixture.curl(base + "/d", headers: []).status == 201)
        #expect(seen.withLock { $0.count } == 3)
    }

    @Test("a fault plan applies to APNs requests too, after the device-token faults")
    func faultPlanAppliesToAPNsRequests() async throws {
        let fixture = try SimulatorFixture()
        fixture.simulator.setFaultPlan { $0.request == 1 ? .status(503, reason: "ServiceUnavailable") : nil }
        let token = try fixture.providerToken()
        let (statuses, bodies) = try await fixture.curlSequence([
            (fixture.url(), fixture.headers(token: token)), (fixture.url(), fixture.headers(token: token)),
        ])
        #expect(statuses == [503, 200])
        #expect(bodies[0].contains("ServiceUnavailable"))
        #expect(fixture.simulator.delivered.count == 1)
    }

    @Test("resetConnection: the connection is reset (RST) without an answer, and counted")
    func resetConnection() async throws {
        let fixture = try SimulatorFixture(responder: Self.echo)
        fixture.simulator.inject(.resetConnection)
        let result = try await fixture.curl(fixture.baseURL + "/x", headers: [])
        #expect(result.exitCode != 0)
        #expect(result.status == 0)
        #expect(result.stderr.contains("reset by peer"), "\(result.stderr)")
        #expect(fixture.simulator.statistics.connectionsDropped == 1)
        // The next request gets a new connection and is answered.
        let next = try await fixture.curl(fixture.baseURL + "/y", headers: [])
        #expect(next.status == 201)
        #expect(next.headers["x-connection"] == "2")
    }

    @Test("a delayed fault on a plain server answers late, through the responder")
    func delayOnAPlainServer() async throws {
        let fixture = try SimulatorFixture(responder: Self.echo)
        fixture.simulator.inject(.delay(.milliseconds(50)))
        let result = try await fixture.curl(fixture.baseURL + "/late", headers: ["x-test: late"], payload: "body")
        #expect(result.status == 201)
        #expect(result.body == "body")
        #expect(result.headers["x-test"] == "late")
    }
}
