import Foundation
import HTTP2Client
import RelayTestSupport
import Synchronization
import Testing

/// GOAWAY, refused streams, resets and silence, played by the simulator on the first connection after it
/// answered the warm-up (``TestHTTP2Server`` with a fault plan; later connections answer everything): a request
/// the server certainly did not process is retried once on a new connection; one it may have processed is
/// never sent twice.
@Suite("HTTP2Client under server faults")
struct HTTP2ClientFaultTests {
    private func client(_ server: TestHTTP2Server, events: Recorder<HTTP2ClientEvent>? = nil) throws -> HTTP2Client {
        var configuration = HTTP2ClientConfiguration(
            origin: server.origin, caFile: TestPKI.shared.caFile, maxConnections: 1)
        if let events {
            configuration.onEvent = { event in events.record(event) }
        }
        return try HTTP2Client(configuration: configuration)
    }

    /// Opens the connection with one answered request, then sends `paths` at once.
    private func sendAfterWarmUp(
        _ client: HTTP2Client, _ paths: [String], timeout: Duration = .seconds(5)
    ) async throws -> [String: Result<HTTP2Response, HTTP2ClientError>] {
        let warmUp = try await client.send(HTTP2Request(path: "/warm-up", body: [1])).get()
        #expect(warmUp.status == 200)
        return await withTaskGroup(of: (String, Result<HTTP2Response, HTTP2ClientError>).self) { group in
            for path in paths {
                group.addTask { (path, await client.send(HTTP2Request(path: path, body: [2], timeout: timeout))) }
            }
            var results: [String: Result<HTTP2Response, HTTP2ClientError>] = [:]
            for await (path, result) in group { results[path] = result }
            return results
        }
    }

    /// A stream reset with REFUSED_STREAM was not processed (RFC 9113 8.7): each is retried
    /// once, on a new connection, and processed there exactly once. (Requests that reach the
    /// client after the first refusal go straight to the new connection, or, when the first had
    /// taken them without sending them, are moved there.)
    @Test func refusedStreamsAreRetriedOnceAndProcessedOnce() async throws {
        // Every request on the first connection after the warm-up is refused.
        let server = try TestHTTP2Server { $0.connection == 1 && $0.request > 1 ? .resetStream : nil }
        let client = try client(server)
        defer { client.shutdown() }
        let paths = ["/a", "/b", "/c"]
        let results = try await sendAfterWarmUp(client, paths)
        var refused = 0
        for path in paths {
            let response = try #require(try? results[path]?.get(), "\(path): \(String(describing: results[path]))")
            #expect(response.status == 200)
            #expect(response[header: "x-connection"] == "2")
            #expect(server.count(.processed, path) == 1)
            let refusals = server.count(.refused, path)
            #expect(refusals <= 1)
            refused += refusals
        }
        #expect(refused >= 1)
        #expect(server.simulator.statistics.streamsRefused == refused)
        // Each refused request was retried; so were requests the first connection had taken but not
        // yet sent when the refusal retired it.
        #expect(client.statistics.retries >= refused && client.statistics.retries <= paths.count)
        #expect(client.statistics.connectionsReplaced == 1)
        let after = try await client.send(HTTP2Request(path: "/after", body: [3])).get()
        #expect(after[header: "x-connection"] == "2")
    }

    @Test func streamsAboveGoawayLastStreamIDAreRetriedOthersAnsweredOnce() async throws {
        // The first connection answers the warm-up and the next request, then the third brings a GOAWAY whose
        // last-stream-id is the second's: it and any later stream on that connection were not processed.
        let server = try TestHTTP2Server { $0.connection == 1 && $0.request == 3 ? .goaway : nil }
        let events = Recorder<HTTP2ClientEvent>()
        let client = try client(server, events: events)
        defer { client.shutdown() }
        let paths = ["/a", "/b", "/c"]
        let results = try await sendAfterWarmUp(client, paths)
        var onFirst = 0
        for path in paths {
            let response = try #require(try? results[path]?.get(), "\(path): \(String(describing: results[path]))")
            #expect(response.status == 200)
            if response[header: "x-connection"] == "1" { onFirst += 1 }
            #expect(server.count(.processed, path) == 1)
        }
        #expect(onFirst == 1)
        // The server did send a GOAWAY (what the retries above rest on), and the client read it.
        #expect(server.simulator.statistics.goawaysSent == 1)
        #expect(events.all.filter { $0.kind == .goaway }.count == 1)
        #expect(client.statistics.retries <= 2)
        #expect(client.statistics.connectionsReplaced == 1)
    }

    @Test func requestsOnAResetConnectionFailAndAreNotResent() async throws {
        // On the first connection after the warm-up: two requests are taken and held, the third is taken and the
        // connection reset (TCP RST), so all three may have been processed.
        let server = try TestHTTP2Server { context in
            guard context.connection == 1, context.request > 1 else { return nil }
            return context.request < 4 ? .stall : .resetConnection
        }
        let client = try client(server)
        defer { client.shutdown() }
        let paths = ["/a", "/b", "/c"]
        let results = try await sendAfterWarmUp(client, paths)
        for path in paths {
            let error = try #require(results[path]?.failure, "\(path): \(String(describing: results[path]))")
            #expect(error.code == .connectionLost || error.code == .protocolError, "\(error)")
            #expect(error.mayHaveBeenProcessed)
            #expect(server.count(.received, path) == 1)
            #expect(server.count(.processed, path) == 0)
        }
        #expect(server.simulator.statistics.connectionsDropped == 1)
        #expect(client.statistics.retries == 0)
        let after = try await client.send(HTTP2Request(path: "/after", body: [3])).get()
        #expect(after[header: "x-connection"] == "2")
    }

    @Test func aSilentConnectionTimesOutAndIsReplaced() async throws {
        // Every request on the first connection after the warm-up is held, never answered.
        let server = try TestHTTP2Server { $0.connection == 1 && $0.request > 1 ? .stall : nil }
        let client = try client(server)
        defer { client.shutdown() }
        let results = try await sendAfterWarmUp(client, ["/a", "/b", "/c"], timeout: .milliseconds(800))
        for (path, result) in results {
            let error = try #require(result.failure)
            #expect(error.code == .timeout)
            #expect(error.mayHaveBeenProcessed)
            #expect(server.count(.received, path) == 1)
        }
        #expect(client.statistics.retries == 0)
        let after = try await client.send(HTTP2Request(path: "/after", body: [3])).get()
        #expect(after[header: "x-connection"] == "2")
        #expect(client.statistics.connectionsReplaced == 1)
    }
}
