import EventLoops
import Foundation
import HTTP2Client
import RelayTestSupport
import Synchronization
import Testing

/// A client given an event loop (a relay worker's) lives on it: its completions run on that loop's
/// thread, and it starts no thread of its own.
@Suite("HTTP2Client on a given event loop")
struct ClientOnALoopTests {
    final class Tally: Sendable {
        let completed = Atomic<Int>(0)
        let onLoop = Atomic<Int>(0)
        let answered = Atomic<Int>(0)
    }

    @Test func completionsRunOnTheLoopAndNoThreadIsStarted() async throws {
        let server = try TestHTTP2Server()
        let loop = try EventLoop(name: "test-worker")
        defer { loop.stop() }
        let client = try HTTP2Client(
            configuration: HTTP2ClientConfiguration(
                origin: server.origin, caFile: TestPKI.shared.caFile, maxConnections: 2),
            loop: loop)
        defer { client.shutdown() }
        // Connected (and proven) first: the connection's making is not what this counts.
        #expect(try await client.send(HTTP2Request(path: "/warm-up", body: [1])).get().status == 200)
        let threadsBefore = try Self.threads()

        let count = 400
        let tally = Tally()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let finish: @Sendable (Result<HTTP2Response, HTTP2ClientError>) -> Void = { result in
                if loop.isCurrent { tally.onLoop.add(1, ordering: .relaxed) }
                if (try? result.get().status) == 200 { tally.answered.add(1, ordering: .relaxed) }
                if tally.completed.add(1, ordering: .relaxed).newValue == count { done.resume() }
            }
            // Half are sent on the loop's own thread (straight in), half from this one (handed over).
            loop.execute {
                for i in 0..<(count / 2) {
                    client.send(HTTP2Request(path: "/loop/\(i)", body: [2]), completion: finish)
                }
            }
            for i in 0..<(count / 2) { client.send(HTTP2Request(path: "/other/\(i)", body: [3]), completion: finish) }
        }
        #expect(tally.answered.load(ordering: .relaxed) == count)
        #expect(tally.onLoop.load(ordering: .relaxed) == count, "every completion on the loop's thread")
        #expect(client.statistics.requestsInFlight == 0)
        #expect(client.statistics.connectionsOpened <= 2)

        // Other tests run beside this one in the process and start threads of their own: the threads that
        // could be the client's are those started by the loop's thread, which inherit its name.
        let started = try Self.threads().subtracting(threadsBefore)
        let fromTheLoop = started.filter { Self.name(ofThread: $0).hasPrefix("test-worker") }
        #expect(fromTheLoop.isEmpty, "threads started on the loop: \(fromTheLoop)")
        #expect(try Self.threads().filter { Self.name(ofThread: $0).hasPrefix("test-worker") }.count == 1)
    }

    /// The threads of this process now (/proc/self/task).
    static func threads() throws -> Set<String> {
        Set(try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task"))
    }

    static func name(ofThread id: String) -> String {
        (try? String(contentsOfFile: "/proc/self/task/\(id)/comm", encoding: .utf8)) ?? ""
    }
}
