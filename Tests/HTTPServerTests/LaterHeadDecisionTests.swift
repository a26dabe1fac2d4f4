import Dispatch
import Glibc
import HTTP1
import RelayTestSupport
import Testing

@testable import HTTPServer

/// `HeadDecision.later`: a request whose head decision comes from another thread, after `head` has returned (the
/// relay's shared limiter answering from Redis), waits suspended and then goes on as if `head` had decided.
@Suite("HTTPServer head decisions that come later")
struct LaterHeadDecisionTests {
    func makeServer(_ handler: TestHandler) throws -> HTTPServer {
        try HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0), handler: handler)
    }

    @Test func readBodyDecidedLaterReadsTheBodyAndAnswers() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("POST /later HTTP/1.1\r\nHost: x\r\nx-id: a\r\nContent-Length: 3\r\n\r\nabc")
        let pending = try handler.pendingDecision("a")

        // Nothing is answered, and other connections are served, while the decision is out.
        for _ in 0..<3 {
            let other = try RawHTTPClient(port: server.port)
            try other.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try other.readResponse().status == 200)
        }
        // A deliberate pace, not a wait for anything: the decision comes from another thread while the client is
        // already blocked reading, as a handler's later decision does. The answer must come whatever the delay.
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) {
            pending.decide(.readBody(limit: 64))
        }
        let answer = try client.readResponse()
        #expect(answer.status == 200)
        #expect(answer.text == "abc")
        // A second decision is ignored, and the connection is kept.
        pending.decide(.respond(.json(500, "{}")))
        try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)
    }

    @Test func theRouteIsResolvedOnceAndReachesTheRequestAcrossTheWait() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("POST /later HTTP/1.1\r\nHost: x\r\nx-id: r\r\nContent-Length: 2\r\n\r\nok")
        try handler.pendingDecision("r").decide(.readBody(limit: 64))
        let answer = try client.readResponse()
        #expect(answer.status == 200)
        #expect(answer.header("x-route") == "6")
        try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx")
        #expect(try client.readResponse().header("x-route") == "5")
        // Once per request: not again when the suspended request was resumed.
        #expect(handler.routed.withLock { $0 } == ["/later", "/echo"])
    }

    @Test func respondDecidedLaterAnswersAndKeepsTheConnection() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("POST /later HTTP/1.1\r\nHost: x\r\nx-id: b\r\nContent-Length: 5\r\n\r\nhello")
        let pending = try handler.pendingDecision("b")
        pending.decide(
            .respond(
                .json(429, #"{"error":"rate_limited"}"#, headers: [HTTP1Headers.Field(name: "retry-after", value: "7")])
            ))
        let answer = try client.readResponse()
        #expect(answer.status == 429)
        #expect(answer.header("retry-after") == "7")
        #expect(answer.header("connection")?.lowercased() != "close")
        try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)
    }

    @Test func aDecisionMadeBeforeHeadReturnsIsTakenAtOnce() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        for round in 0..<3 {
            try client.send("POST /later HTTP/1.1\r\nHost: x\r\nx-decide: now\r\nContent-Length: 2\r\n\r\nr\(round)")
            let answer = try client.readResponse()
            #expect(answer.status == 200)
            #expect(answer.text == "r\(round)")
        }
    }

    @Test func aDeclaredLengthOverTheLaterLimitIsRefused() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("POST /later HTTP/1.1\r\nHost: x\r\nx-id: c\r\nContent-Length: 100\r\n\r\n")
        try handler.pendingDecision("c").decide(.readBody(limit: 10))
        let answer = try client.readResponse()
        #expect(answer.status == 413)
        #expect(client.isClosedByPeer())
    }

    @Test func manyDecisionsFromOtherThreadsAreEachAnsweredOnce() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        defer { server.stop() }
        let count = 60
        let clients = try (0..<count).map { index in
            let client = try RawHTTPClient(port: server.port)
            try client.send("POST /later HTTP/1.1\r\nHost: x\r\nx-id: m\(index)\r\nContent-Length: 1\r\n\r\nx")
            return client
        }
        let decisions = try (0..<count).map { try handler.pendingDecision("m\($0)") }
        DispatchQueue.concurrentPerform(iterations: count) { index in
            decisions[index].decide(index % 2 == 0 ? .readBody(limit: 8) : .respond(.json(429, "{}")))
        }
        for (index, client) in clients.enumerated() {
            #expect(try client.readResponse().status == (index % 2 == 0 ? 200 : 429))
        }
    }

    @Test func stopWhileWaitingForADecisionIsHarmless() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        let client = try RawHTTPClient(port: server.port)
        try client.send("POST /later HTTP/1.1\r\nHost: x\r\nx-id: s\r\nContent-Length: 1\r\n\r\nx")
        let pending = try handler.pendingDecision("s")
        server.stop()
        #expect(client.isClosedByPeer())
        pending.decide(.readBody(limit: 8))
        #expect(server.openRequestContexts == 0)
        handler.parkedDecisions.withLock { $0 = [:] }
        try Poll.wait(for: "every context freed", within: .seconds(10)) { server.liveRequestContexts == 0 }
    }
}
