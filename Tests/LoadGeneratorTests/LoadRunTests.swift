import EventLoops
import Glibc
import Testing

@testable import LoadGenerator

/// The measurements against a loopback server of the test's own: what they send, and what they report.
@Suite("The load generator's measurements, on loopback", .serialized)
struct LoadRunTests {
    private func target(_ server: TestHTTPServer) throws -> LoadTarget {
        try #require(LoadTarget("127.0.0.1:\(server.port)"))
    }

    private func requests(_ target: LoadTarget, count: Int = 4) -> [[UInt8]] {
        (0..<count).map {
            HTTPRequestBytes.post(path: "/v1/push", host: target.text, body: Array("{\"n\":\($0)}".utf8))
        }
    }

    @Test("closed loop: N connections, each with one request outstanding, every answer counted")
    func closedLoop() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let target = try target(server)
        // A second's window: answers take microseconds, but a loaded machine under a sanitizer has left this
        // process unscheduled for most of 0.3 s (4 answers counted).
        let loop = ClosedLoop(
            address: target.address, requests: requests(target), connections: 4, seconds: 1, warmupSeconds: 0.1)
        let report = try loop.run(watching: WatchedProcesses(Arguments([])))
        #expect(report.answers > 10)
        #expect(report.statuses == [200: report.answers])
        #expect(report.latencies.count == report.answers)
        #expect(report.failures == 0)
        let seen = server.observed
        #expect(seen.connections == 4)
        #expect(seen.overlapping == 0)
        // The warm-up's answers and those after the window are not counted.
        #expect(seen.requests.count > report.answers)
    }

    @Test("open loop: every scheduled request sent, latency counted from when it was due")
    func openLoopMeasuresFromTheSchedule() throws {
        // One connection, requests due every 10 ms, each answered 20 ms after it arrives: requests wait for
        // the connection, and their latency, counted from when each was due, grows with the wait.
        let server = try TestHTTPServer(delayMilliseconds: 20)
        defer { server.stop() }
        let target = try target(server)
        let loop = OpenLoop(
            address: target.address, requests: requests(target), rate: 100, seconds: 0.2, warmupSeconds: 0.05,
            connections: 1)
        let report = try loop.run()
        #expect(report.scheduled == 25)
        #expect(report.statuses == [200: 25])
        #expect(report.measured.count == 20)
        #expect(report.failures == 0 && report.unanswered == 0)
        // The last request fell due at 240 ms and was answered after 25 answers of 20 ms each (500 ms).
        #expect(try #require(report.measured.max()) >= 200_000_000)
        #expect(server.observed.requests.count == 25)
        #expect(server.observed.overlapping == 0)
    }

    @Test("open loop: a closed connection is replaced; a request lost with it is a failure")
    func openLoopReplacesClosedConnections() throws {
        let server = try TestHTTPServer { index, _ in
            TestHTTPServer.Answer(close: index == 3, drop: index == 7)
        }
        defer { server.stop() }
        let target = try target(server)
        let loop = OpenLoop(
            address: target.address, requests: requests(target), rate: 200, seconds: 0.1, warmupSeconds: 0,
            connections: 2)
        let report = try loop.run()
        #expect(report.scheduled == 20)
        // The fourth answer arrives before its connection closes; the eighth request is never answered.
        #expect(report.statuses == [200: 19])
        #expect(report.failures == 1 && report.unanswered == 0)
        #expect(server.observed.connections == 4)
    }

    @Test("idle: every connection answered once, then held; those the server closed are not still open")
    func idleConnections() throws {
        let server = try TestHTTPServer { index, _ in TestHTTPServer.Answer(close: index % 4 == 0) }
        defer { server.stop() }
        let target = try target(server)
        let idle = IdleConnections(
            address: target.address, host: target.text, count: 40, relayPID: getpid(), settleSeconds: 0.2)
        let report = try idle.run()
        #expect(report.answered == 40)
        #expect(report.failures == 0)
        #expect(report.stillOpen == 30)
        #expect(report.rssKilobytes > 0 && report.peakKilobytes >= report.rssKilobytes)
        #expect(server.observed.requests == [String](repeating: "/healthz", count: 40))
    }

    @Test("idle with pushes: each connection's one request is a push, taken in turn")
    func idleAfterAPush() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let target = try target(server)
        let idle = IdleConnections(
            address: target.address, host: target.text, count: 6, relayPID: getpid(), settleSeconds: 0.1,
            requests: requests(target, count: 3))
        let report = try idle.run()
        #expect(report.answered == 6 && report.stillOpen == 6)
        #expect(server.observed.requests == [String](repeating: "/v1/push", count: 6))
    }

    @Test("mint: one grant per request, each in its own push body")
    func mint() throws {
        let server = try TestHTTPServer { index, _ in
            TestHTTPServer.Answer(body: #"{"grant":"grant-\#(index)","expires_at":"2030-01-01T00:00:00Z"}"#)
        }
        defer { server.stop() }
        let target = try target(server)
        let minter = GrantMinter(
            address: target.address, host: target.text, count: 10, connections: 3, environment: "sandbox")
        let bodies = try minter.run()
        #expect(bodies.count == 10)
        let grants = Set(bodies.compactMap { GrantMinter.grant(in: Array($0.utf8)[...]) })
        #expect(grants == Set((0..<10).map { "grant-\($0)" }))
        #expect(server.observed.requests == [String](repeating: "/v1/grant", count: 10))
    }

    @Test("mint: an answer other than 200 stops it with the status")
    func mintRefused() throws {
        let server = try TestHTTPServer { _, _ in TestHTTPServer.Answer(status: 429, body: "{}") }
        defer { server.stop() }
        let target = try target(server)
        let minter = GrantMinter(
            address: target.address, host: target.text, count: 5, connections: 2, environment: "sandbox")
        #expect(throws: LoadError(.failed, "")) { try minter.run() }
    }

    @Test("nothing listening: the measurement stops with an error instead of retrying")
    func nothingListening() throws {
        // A port that was free a moment ago.
        let server = try TestHTTPServer()
        let target = try target(server)
        server.stop()
        let loop = ClosedLoop(
            address: target.address, requests: requests(target), connections: 2, seconds: 0.2, warmupSeconds: 0)
        #expect(throws: LoadError(.failed, "")) { try loop.run(watching: WatchedProcesses(Arguments([]))) }
    }

    @Test("--target takes an IPv4 literal and a port")
    func targets() {
        #expect(LoadTarget("127.0.0.1:8787")?.text == "127.0.0.1:8787")
        #expect(LoadTarget("localhost:8787") == nil)
        #expect(LoadTarget("127.0.0.1") == nil)
        #expect(LoadTarget("127.0.0.1:99999") == nil)
    }
}
