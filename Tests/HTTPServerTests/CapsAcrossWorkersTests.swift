import Dispatch
import Foundation
import RelayTestSupport
import Testing

@testable import HTTPServer

/// The per-address cap across workers: a connection its client has closed stops counting even while the worker that
/// owns it has not run since (a loaded machine may leave its thread unscheduled for longer than the wait for room),
/// and a worker that never runs again is not waited for without end. Each worker is held by a job on its loop, as an
/// unscheduled thread would be.
@Suite("Connection caps across workers")
struct CapsAcrossWorkersTests {
    /// Holds a worker's loop from the moment `hold` returns until `release`.
    final class Hold: Sendable {
        private let started = DispatchSemaphore(value: 0)
        private let released = DispatchSemaphore(value: 0)

        init(_ worker: ServerWorker) throws {
            let accepted = worker.loop.execute { [started, released] in
                started.signal()
                released.wait()
            }
            try #require(accepted, "the worker's loop took no work")
            started.wait()
        }

        func release() { released.signal() }
    }

    func makeServer() throws -> HTTPServer {
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
        configuration.perAddressConnectionLimit = 1
        configuration.threads = 2
        return try HTTPServer(configuration: configuration, handler: TestHandler())
    }

    /// The client's first connection, answered by worker 1 (worker 0 held while it is accepted), then worker 1 held:
    /// the client closes it, and its next connection can only be accepted by worker 0, with the close unread.
    func firstConnectionThenHoldItsWorker(_ server: HTTPServer) throws -> Hold {
        let workers = server.workers
        try #require(workers.count == 2)
        let first: RawHTTPClient
        do {
            let holdZero = try Hold(workers[0])
            defer { holdZero.release() }
            first = try RawHTTPClient(port: server.port, timeoutSeconds: 10)
            try first.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try first.readResponse().status == 200)
        }
        let holdOne = try Hold(workers[1])
        _ = consume first  // closed by its client; worker 1 has not read that
        return holdOne
    }

    @Test func aCloseTheOwningWorkerHasNotReadYetStillMakesRoom() throws {
        let server = try makeServer()
        defer { server.stop() }
        let holdOne = try firstConnectionThenHoldItsWorker(server)
        let second = try RawHTTPClient(port: server.port, timeoutSeconds: 10)
        try second.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        // Longer than the wait for room (250 ms): the connection is past it, waiting for worker 1's turn.
        Thread.sleep(forTimeInterval: 1)
        holdOne.release()
        // The client never held more than its cap of one: served, not refused.
        let response = try second.readResponse()
        #expect(response.status == 200, "\(response.status) \(response.error ?? "")")
    }

    @Test func aWorkerThatNeverTurnsIsNotWaitedForWithoutEnd() throws {
        let server = try makeServer()
        defer { server.stop() }
        let holdOne = try firstConnectionThenHoldItsWorker(server)
        defer { holdOne.release() }
        let second = try RawHTTPClient(port: server.port, timeoutSeconds: 20)
        let started = ContinuousClock.now
        try second.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        // Worker 1 stays held: refused once the bound on the wait for its turn has passed, as over the cap.
        let response = try second.readResponse()
        let waited = started.duration(to: .now)
        #expect(response.status == 503)
        #expect(response.error == "overloaded")
        #expect(response.header("connection")?.lowercased() == "close")
        #expect(waited >= .milliseconds(Int64(ServerConnection.turnsBound)), "\(waited)")
    }
}
