import Dispatch
import Glibc
import HTTP1
import RelayTestSupport
import Synchronization
import Testing

@testable import HTTPServer

@Suite("HTTPServer over loopback")
struct HTTPServerTests {
    func makeServer(
        _ handler: TestHandler = TestHandler(), host: String = "127.0.0.1",
        configure: (inout HTTPServerConfiguration) -> Void = { _ in }
    ) throws -> HTTPServer {
        var configuration = HTTPServerConfiguration(host: host, port: 0)
        configure(&configuration)
        return try HTTPServer(configuration: configuration, handler: handler)
    }

    @Test func getAnsweredFromHead() throws {
        let server = try makeServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.text == #"{"hello":"world"}"#)
        #expect(response.header("content-type") == "application/json")
        #expect(response.header("connection")?.lowercased() != "close")
    }

    @Test func theHandlerRunsOnTheWorkerTheHeadNames() throws {
        let server = try makeServer { $0.threads = 2 }
        defer { server.stop() }
        var seen: Set<String> = []
        // Connections are spread over the workers by whichever wakes first: enough of them to see both, bounded.
        for _ in 0..<200 where seen.count < 2 {
            let client = try RawHTTPClient(port: server.port)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
            let worker = try client.readResponse().header("x-worker") ?? ""
            #expect(["0 duo-http-0", "1 duo-http-1"].contains(worker), "\(worker)")
            seen.insert(worker)
        }
        #expect(seen.count == 2)
    }

    @Test func keepAliveServesSeveralRequestsOnOneConnection() throws {
        let server = try makeServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)
        try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde")
        let echoed = try client.readResponse()
        #expect(echoed.status == 200)
        #expect(echoed.text == "abcde")
        #expect(echoed.header("x-echo") == "yes")
        try client.send("GET /missing HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 404)
    }

    @Test func headAndUnknownMethodsReachTheHandler() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = try client.readResponse(expectBody: false)
        #expect(head.status == 200)
        try client.send("BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n")
        let brew = try client.readResponse()
        #expect(brew.status == 404)
        #expect(brew.text.contains("BREW"))
        #expect(handler.methodsSeen.withLock { $0 } == ["HEAD", "BREW"])
    }

    @Test func theServerAnswersWaitingRequestsInTheHandlersStead() throws {
        let handler = TestHandler()
        let server = try makeServer(handler) { $0.threads = 2 }
        defer { server.stop() }
        var clients: [RawHTTPClient] = []
        for id in ["a", "b", "c"] {
            let client = try RawHTTPClient(port: server.port)
            try client.send("POST /async HTTP/1.1\r\nHost: x\r\nx-id: \(id)\r\nContent-Length: 2\r\n\r\nhi")
            clients.append(client)
        }
        let responders = try ["a", "b", "c"].map { try handler.responder($0) }
        server.answerWaiting { route in HTTP1Response.json(503, #"{"route":\#(route)}"#) }
        for client in clients {
            let answer = try client.readResponse()
            #expect(answer.status == 503)
            // The route the server resolved for /async (its length, in TestHandler).
            #expect(answer.text == #"{"route":6}"#)
        }
        #expect(server.pendingResponses == 0)
        // The handler's own answer, coming later, is ignored; the connections go on.
        for responder in responders { responder.respond(.json(200, "{}")) }
        for client in clients {
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().text == #"{"hello":"world"}"#)
        }
    }

    @Test func asynchronousAnswerDoesNotHoldUpOtherConnections() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        defer { server.stop() }
        let slow = try RawHTTPClient(port: server.port)
        try slow.send("POST /async HTTP/1.1\r\nHost: x\r\nx-id: a\r\nContent-Length: 3\r\n\r\nabc")
        let responder = try handler.responder("a")
        #expect(server.pendingResponses == 1)

        // Other connections are served while the first waits.
        for _ in 0..<3 {
            let other = try RawHTTPClient(port: server.port)
            try other.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try other.readResponse().status == 200)
        }

        // A deliberate pace, not a wait for anything: the answer comes from another thread while the client is
        // already blocked reading, as a handler's later answer does. It must arrive whatever the delay.
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(200)) {
            responder.respond(.json(202, #"{"late":true}"#))
        }
        let answer = try slow.readResponse()
        #expect(answer.status == 202)
        #expect(answer.text == #"{"late":true}"#)
        #expect(server.pendingResponses == 0)

        // The connection is still usable, and a second answer to the same request is ignored.
        responder.respond(.json(500, "{}"))
        try slow.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try slow.readResponse().status == 200)
    }

    /// A refusal reaches the client as the handler's JSON answer, with `connection: close`, and the connection closes
    /// once the answer is out: a head over its size (the handler's `refused`, here its default JSON) and a declared
    /// body over the handler's limit (its `bodyTooLarge`, answered with only the headers sent: it does not wait for
    /// the body). The rules themselves (413, 414, 431, `Expect`, chunked bodies, the lingering close) are
    /// HTTP1Tests'.
    @Test(arguments: ["a head over its size", "a declared body over the limit"])
    func aRefusalReachesTheClientAsJSONAndTheConnectionCloses(_ refusal: String) throws {
        let (request, status) =
            refusal == "a head over its size"
            ? ("GET /hello HTTP/1.1\r\nHost: x\r\nX-Filler: \(String(repeating: "a", count: 6000))\r\n\r\n", 431)
            : ("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", 413)
        let server = try makeServer(TestHandler(limit: 64)) { $0.maxHeaderBytes = 4096 }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send(request)
        let response = try client.readResponse()
        #expect(response.status == status)
        #expect(response.text == #"{"error":"too_large"}"#)
        #expect(response.header("content-type") == "application/json")
        #expect(response.header("connection")?.lowercased() == "close")
        #expect(client.isClosedByPeer())
    }

    @Test func answerFromHeadDropsASmallBodyAndKeepsTheConnection() throws {
        let server = try makeServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("POST /missing HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
        try client.send("hello")
        #expect(try client.readResponse().status == 404)
        try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)
    }

    @Test func idleConnectionIsClosedAfterTheTimeout() throws {
        let server = try makeServer { $0.connectionTimeoutSeconds = 1 }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)
        let start = ContinuousClock.now
        #expect(client.isClosedByPeer())
        let waited = ContinuousClock.now - start
        // Wall-clock: the server's idle timer runs on its loop's real clock (HTTP1ConnectionTests check the
        // deadline itself on a test clock); bounded generously either side of the 1 s timeout.
        #expect(waited >= .milliseconds(500))
        #expect(waited < .seconds(8))
    }

    @Test func perAddressConnectionLimitIsEnforced() throws {
        let server = try makeServer { $0.perAddressConnectionLimit = 2 }
        defer { server.stop() }
        let first = try RawHTTPClient(port: server.port)
        let second = try RawHTTPClient(port: server.port)
        for client in [first, second] {
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().status == 200)
        }
        // Over the cap: answered 503 `overloaded` (never a reset), and closed.
        let third = try RawHTTPClient(port: server.port)
        try third.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        let refused = try third.readResponse()
        #expect(refused.status == 503)
        #expect(refused.error == "overloaded")
        #expect(refused.header("retry-after") == "1")
        #expect(refused.header("connection")?.lowercased() == "close")
        #expect(third.isClosedByPeer())
        #expect(server.core.caps.open == 2)
        #expect(server.connectionsOpen == 2)
        // Counted as the refused connection ends (after its lingering close; the client's close ends that).
        _ = consume third
        #expect(Poll.until(within: .seconds(10)) { server.connectionsRefused == 1 })
        // Once one closes, a new connection is accepted again.
        _ = consume first
        try Poll.wait(for: "a new connection served", within: .seconds(10)) {
            guard let fourth = try? RawHTTPClient(port: server.port),
                (try? fourth.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")) != nil
            else { return false }
            return (try? fourth.readResponse().status) == 200
        }
    }

    /// A connection the server closes stops counting against the caps at once, in the same turn of its loop, not when
    /// its handle's close callback runs a turn later (another connection may be accepted in between).
    @Test func aConnectionStopsCountingWhenTheServerClosesIt() throws {
        let server = try makeServer { $0.threads = 1 }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)
        let worker = try #require(server.workers.first)
        #expect(server.core.caps.open == 1)
        // The drain closes the idle connection; the count is read before the loop's turn ends.
        let open = try worker.loop.performAndWait { [core = server.core] in
            worker.quiesce()
            return core.caps.open
        }
        #expect(open == 0)
        #expect(client.isClosedByPeer(within: 5))
    }

    /// A connection stops counting against its cap the moment it closes, not a turn of the loop later: one worker and
    /// a cap of one, and a client that opens a new connection for each request after closing the last one, is never
    /// refused (the new connection's accept and the old one's end of stream often reach the loop in one turn).
    @Test func aClosedConnectionStopsCountingAtOnce() throws {
        let server = try makeServer {
            $0.perAddressConnectionLimit = 1
            $0.threads = 1
        }
        defer { server.stop() }
        for attempt in 0..<500 {
            let client = try RawHTTPClient(port: server.port, timeoutSeconds: 5)
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            let status = try? client.readResponse().status
            #expect(status == 200, "request \(attempt)")
            if status != 200 { break }
        }
    }

    @Test func clientLeavingWhileSuspendedIsHarmless() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        defer { server.stop() }
        do {
            let client = try RawHTTPClient(port: server.port)
            try client.send("POST /async HTTP/1.1\r\nHost: x\r\nx-id: gone\r\nContent-Length: 1\r\n\r\nx")
            _ = try handler.responder("gone")
        }  // the client closes here
        let responder = try handler.responder("gone")
        responder.respond(.json(200, "{}"))
        responder.respond(.json(200, "{}"))
        try Poll.wait(for: "every context released", within: .seconds(10)) {
            server.openRequestContexts == 0 && server.pendingResponses == 0
        }

        let client = try RawHTTPClient(port: server.port)
        try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)
    }

    @Test func quiesceRefusesNewConnectionsButAnswersPendingOnes() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("POST /async HTTP/1.1\r\nHost: x\r\nx-id: q\r\nContent-Length: 1\r\n\r\nx")
        let responder = try handler.responder("q")

        server.quiesce()
        #expect(throws: RawHTTPClient.Failure.self) {
            let late = try RawHTTPClient(port: server.port)
            try late.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try late.readResponse()
        }
        #expect(server.pendingResponses == 1)
        responder.respond(.json(200, #"{"done":true}"#))
        let answer = try client.readResponse()
        #expect(answer.status == 200)
        #expect(answer.text == #"{"done":true}"#)
        #expect(answer.header("connection")?.lowercased() == "close")
        #expect(server.pendingResponses == 0)
    }

    /// The drain of a SIGTERM: idle keep-alive connections close at once, a request in progress is answered and its
    /// connection closes after the answer, and the wait for the last close is signalled (it returns as soon as that
    /// answer is out, and times out while a request still waits).
    @Test func quiesceClosesIdleConnectionsAndTheDrainEndsWithTheLastAnswer() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        defer { server.stop() }
        let idle = try RawHTTPClient(port: server.port)
        try idle.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try idle.readResponse().status == 200)
        let busy = try RawHTTPClient(port: server.port)
        try busy.send("POST /async HTTP/1.1\r\nHost: x\r\nx-id: d\r\nContent-Length: 1\r\n\r\nx")
        let responder = try handler.responder("d")

        server.quiesce()
        #expect(idle.isClosedByPeer(within: 5))
        #expect(!server.waitUntilDrained(until: .now() + .milliseconds(200)))
        responder.respond(.json(200, "{}"))
        #expect(server.waitUntilDrained(until: .now() + .seconds(10)))
        let answer = try busy.readResponse()
        #expect(answer.status == 200)
        #expect(answer.header("connection")?.lowercased() == "close")
        #expect(busy.isClosedByPeer(within: 5))
    }

    @Test func stopWithASuspendedRequestIsHarmless() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        let client = try RawHTTPClient(port: server.port)
        try client.send("POST /async HTTP/1.1\r\nHost: x\r\nx-id: s\r\nContent-Length: 1\r\n\r\nx")
        let responder = try handler.responder("s")
        server.stop()
        #expect(client.isClosedByPeer())
        responder.respond(.json(200, "{}"))
        #expect(server.openRequestContexts == 0)
        #expect(server.pendingResponses == 0)
        server.stop()
    }

    /// stop() while clients come and go, many times over: worker threads are awake then, and stopping the listeners
    /// beside them must neither abort the process nor leave the port open.
    @Test func stopWhileClientsComeAndGoIsHarmless() throws {
        final class Flag: Sendable {
            let raised = Atomic<Bool>(false)
            let answered = Atomic<Int>(0)
        }
        for _ in 0..<100 {
            let server = try makeServer()
            let port = server.port
            let stopping = Flag()
            let clients = DispatchGroup()
            DispatchQueue.global().async(group: clients) {
                while !stopping.raised.load(ordering: .relaxed) {
                    guard let client = try? RawHTTPClient(port: port) else { return }
                    try? client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
                    if (try? client.readResponse()) != nil { stopping.answered.add(1, ordering: .relaxed) }
                }
            }
            // Clients are coming and going: one has been answered.
            Poll.until(within: .seconds(10), every: .milliseconds(1)) { stopping.answered.load(ordering: .relaxed) > 0 }
            server.stop()
            // The clients end at the first refused connect, or here should another server take the port at once.
            stopping.raised.store(true, ordering: .relaxed)
            clients.wait()
            #expect(throws: RawHTTPClient.Failure.self) { try RawHTTPClient(port: port) }
        }
    }

    /// The relay's SIGTERM drain quiesces while clients keep coming: MHD_quiesce_daemon aborted the process then
    /// (a worker thread awake at that moment took the socket out of its epoll set first). Requests already in are
    /// answered, and the port refuses at once.
    @Test func quiesceWhileClientsComeAndGoIsHarmless() throws {
        final class Counts: Sendable {
            let stop = Atomic<Bool>(false)
            let answered = Atomic<Int>(0)
        }
        for _ in 0..<100 {
            let server = try makeServer()
            let port = server.port
            let counts = Counts()
            let clients = DispatchGroup()
            for _ in 0..<2 {
                DispatchQueue.global().async(group: clients) {
                    while !counts.stop.load(ordering: .relaxed) {
                        guard let client = try? RawHTTPClient(port: port, timeoutSeconds: 5) else { return }
                        try? client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
                        if (try? client.readResponse())?.status == 200 { counts.answered.add(1, ordering: .relaxed) }
                    }
                }
            }
            // Clients are coming and going: one has been answered.
            Poll.until(within: .seconds(10), every: .milliseconds(1)) { counts.answered.load(ordering: .relaxed) > 0 }
            server.quiesce()
            #expect(throws: RawHTTPClient.Failure.self) { try RawHTTPClient(port: port) }
            counts.stop.store(true, ordering: .relaxed)
            clients.wait()
            server.stop()
        }
    }

    @Test func stopRacingWithLateAnswersIsHarmless() throws {
        let handler = TestHandler()
        let server = try makeServer(handler)
        let clients = try (0..<40).map { index in
            let client = try RawHTTPClient(port: server.port)
            try client.send("POST /async HTTP/1.1\r\nHost: x\r\nx-id: r\(index)\r\nContent-Length: 1\r\n\r\nx")
            return client
        }
        let responders = try (0..<40).map { try handler.responder("r\($0)") }
        #expect(server.pendingResponses == 40)
        let answering = DispatchGroup()
        DispatchQueue.global().async(group: answering) {
            for responder in responders {
                responder.respond(.json(200, "{}"))
            }
        }
        server.stop()
        answering.wait()
        #expect(server.openRequestContexts == 0)
        #expect(server.pendingResponses == 0)
        for client in clients {
            // Each got its answer or was closed; none hangs.
            _ = try? client.readResponse()
        }
    }

    /// Every kind of request, ended every way, many times: once each is over and the handler has let go of its
    /// responders, no request context is left, while the server runs and after it stops.
    @Test func noRequestContextOutlivesItsRequest() throws {
        let handler = TestHandler(limit: 64)
        let server = try makeServer(handler) {
            $0.maxURLBytes = 256
            $0.maxHeaderBytes = 1024
            // MHD sometimes notices a client that left in the middle of its request only when the connection times
            // out (seen here about one time in ten): a short timeout bounds that wait.
            $0.connectionTimeoutSeconds = 2
        }
        defer { server.stop() }
        let rounds = 12
        for round in 0..<rounds {
            // Answered from the head, inline from request(), and from the head with a small body dropped.
            let client = try RawHTTPClient(port: server.port)
            try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
            #expect(try client.readResponse().text == "abc")
            try client.send("POST /missing HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
            #expect(try client.readResponse().status == 404)

            // Answered later, on a connection that stays open.
            try client.send("POST /async HTTP/1.1\r\nHost: x\r\nx-id: a\(round)\r\nContent-Length: 1\r\n\r\nx")
            try handler.responder("a\(round)").respond(.json(202, "{}"))
            #expect(try client.readResponse().status == 202)

            // Refused: a declared body over the limit, a chunked one growing past it, long URL, long headers.
            let refusals = [
                "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n",
                "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "28\r\n\(String(repeating: "z", count: 40))\r\n28\r\n\(String(repeating: "z", count: 40))\r\n",
                "GET /\(String(repeating: "p", count: 400)) HTTP/1.1\r\nHost: x\r\n\r\n",
                "GET /hello HTTP/1.1\r\nHost: x\r\nX-Filler: \(String(repeating: "f", count: 2000))\r\n\r\n",
            ]
            for (index, request) in refusals.enumerated() {
                let refused = try RawHTTPClient(port: server.port)
                try refused.send(request)
                #expect(try [413, 414, 431].contains(refused.readResponse().status), "refusal \(index)")
            }

            // The client leaves: in the middle of the headers, in the middle of the body, while its request
            // waits for an answer (answered after it left).
            do {
                let leaving = try RawHTTPClient(port: server.port)
                try leaving.send("GET /hello HTTP/1.1\r\nHost: x\r\n")
            }
            do {
                let leaving = try RawHTTPClient(port: server.port)
                try leaving.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
            }
            do {
                let leaving = try RawHTTPClient(port: server.port)
                try leaving.send("POST /async HTTP/1.1\r\nHost: x\r\nx-id: g\(round)\r\nContent-Length: 1\r\n\r\nx")
                _ = try handler.responder("g\(round)")
            }
            try handler.responder("g\(round)").respond(.json(200, "{}"))
        }
        Poll.until(within: .seconds(10)) { server.openRequestContexts == 0 && server.pendingResponses == 0 }
        #expect(server.openRequestContexts == 0)
        #expect(server.pendingResponses == 0)
        // Until the handler lets go, the responders it keeps keep their contexts.
        #expect(server.liveRequestContexts == 2 * rounds)
        handler.parked.withLock { $0.removeAll() }
        Poll.until(within: .seconds(10)) { server.liveRequestContexts == 0 }
        #expect(server.liveRequestContexts == 0)

        // Requests still waiting when the server stops, from clients that left and from clients still there.
        var waiting: [RawHTTPClient] = []
        for index in 0..<rounds {
            let client = try RawHTTPClient(port: server.port)
            try client.send("POST /async HTTP/1.1\r\nHost: x\r\nx-id: s\(index)\r\nContent-Length: 1\r\n\r\nx")
            _ = try handler.responder("s\(index)")
            if index % 2 == 0 { waiting.append(client) }
        }
        server.stop()
        #expect(server.openRequestContexts == 0)
        #expect(server.pendingResponses == 0)
        handler.parked.withLock { $0.removeAll() }
        #expect(server.liveRequestContexts == 0)
        withExtendedLifetime(waiting) {}
    }

    /// A handler that keeps a responder (here: answered late, after the server stopped) keeps that one request's
    /// context, never the server and the handler with it.
    @Test func aKeptResponderDoesNotKeepTheServerAlive() throws {
        weak var weakHandler: TestHandler?
        weak var weakCore: ServerCore?
        let kept: HTTPResponder
        let ledgers: [WorkerLedger]
        do {
            let handler = TestHandler()
            weakHandler = handler
            let server = try makeServer(handler)
            weakCore = server.core
            ledgers = server.core.ledgers
            let client = try RawHTTPClient(port: server.port)
            try client.send("POST /async HTTP/1.1\r\nHost: x\r\nx-id: k\r\nContent-Length: 1\r\n\r\nx")
            kept = try handler.responder("k")
            server.stop()
        }
        #expect(weakCore == nil)
        #expect(weakHandler == nil)
        #expect(ledgers.total { $0.alive.load(ordering: .relaxed) } == 1)
        kept.respond(.json(200, "{}"))
        #expect(ledgers.total { $0.pending.load(ordering: .relaxed) } == 0)
        _ = consume kept
        #expect(ledgers.total { $0.alive.load(ordering: .relaxed) } == 0)
    }

    @Test func peerIsIPv4LoopbackOnAnIPv4Listener() throws {
        let server = try makeServer(host: "127.0.0.1")
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port, host: "127.0.0.1")
        try client.send("GET /peer HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().text == "ipv4 127.0.0.1")
    }

    @Test func peerIsIPv6LoopbackOnAnIPv6Listener() throws {
        let server = try makeServer(host: "::1")
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port, host: "::1")
        try client.send("GET /peer HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(
            try client.readResponse().text == "ipv6 "
                + (Array(repeating: "0", count: 15) + ["1"]).joined(separator: "."))
    }

    /// What a handler keeps in a connection's memo is there for the connection's next requests, and for no other
    /// connection's.
    @Test func everyRequestOfAConnectionCarriesItsMemoAndOnlyIts() throws {
        let server = try makeServer(host: "127.0.0.1")
        defer { server.stop() }
        let first = try RawHTTPClient(port: server.port, host: "127.0.0.1")
        let second = try RawHTTPClient(port: server.port, host: "127.0.0.1")
        for (client, expected) in [(first, "new 1"), (first, "kept 1"), (second, "new 2"), (first, "kept 1")] {
            try client.send("GET /memo HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().text == expected)
        }
        try second.send("GET /memo HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try second.readResponse().text == "kept 2")
    }

    // MARK: A passed socket (socket activation)

    /// A server on a passed socket listens on it as on its own; when it stops accepting, the socket is not shut down:
    /// a connection that comes meanwhile waits in the backlog, unanswered but not reset, and the next server on the
    /// same socket answers it (what a restart under a socket unit does).
    @Test func aPassedSocketOutlivesItsServerAndTheNextServerAnswersTheBacklog() throws {
        let held = try SilentListener(backlog: 128)
        func serve() throws -> HTTPServer {
            try makeServer {
                $0.passedSocket = fcntl(held.descriptor, F_DUPFD_CLOEXEC, 0)
                $0.threads = 2
            }
        }
        let first = try serve()
        #expect(first.port == held.port)
        let client = try RawHTTPClient(port: held.port)
        try client.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)
        first.quiesce()
        #expect(client.isClosedByPeer(within: 5))
        let waiting = try RawHTTPClient(port: held.port, timeoutSeconds: 10)
        try waiting.send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
        first.stop()
        // Nobody accepts for a while: the connection waits in the backlog, not reset.
        var entry = pollfd(fd: waiting.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&entry, 1, 300) == 0, "the waiting connection was closed or reset")
        let second = try serve()
        defer { second.stop() }
        let answer = try waiting.readResponse()
        #expect(answer.status == 200)
        #expect(answer.text == #"{"hello":"world"}"#)
    }

    /// What the service manager says is checked before the socket is taken, each refusal naming its cause.
    @Test func socketActivationTakesExactlyOneSocketMeantForThisProcess() throws {
        let pid = getpid()
        #expect(
            try SocketActivation.passedDescriptor(
                environment: ["LISTEN_PID": String(pid), "LISTEN_FDS": "1"], processID: pid) == 3)
        let refusals: [([String: String], String)] = [
            ([:], "no socket was passed"),
            (["LISTEN_FDS": "1"], "no socket was passed"),
            (["LISTEN_PID": String(pid + 1), "LISTEN_FDS": "1"], "meant for another process"),
            (["LISTEN_PID": String(pid), "LISTEN_FDS": "2"], "exactly one listening socket"),
            (["LISTEN_PID": String(pid), "LISTEN_FDS": "0"], "exactly one listening socket"),
        ]
        for (environment, reason) in refusals {
            do {
                _ = try SocketActivation.passedDescriptor(environment: environment, processID: pid)
                Issue.record("accepted \(environment)")
            } catch {
                #expect(error.reason.contains(reason), "\(error.reason)")
            }
        }
    }

    /// The passed descriptor must be a listening TCP socket; anything else is refused, and the descriptor closed.
    @Test func aPassedDescriptorThatIsNotAListeningTCPSocketIsRefused() throws {
        let unbound = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let datagram = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        // A file of this test's own: another test's thread may open a file (or a socket) under the same number once
        // the server has closed it, so what is checked afterwards is whether the number still names this one.
        var template = Array("/tmp/duo-relay-passed-XXXXXX".utf8CString)
        let file = mkstemp(&template)
        defer { unlink(template) }
        func identity(_ descriptor: Int32) -> [UInt] {
            var status = stat()
            guard fstat(descriptor, &status) == 0 else { return [] }
            return [UInt(status.st_dev), UInt(status.st_ino)]
        }
        for (descriptor, reason) in [
            (unbound, "not listening"), (datagram, "not a TCP stream socket"), (file, "is not a socket"),
        ] {
            let passed = identity(descriptor)
            #expect(!passed.isEmpty)
            do {
                _ = try makeServer { $0.passedSocket = descriptor }
                Issue.record("accepted a descriptor that is \(reason)")
            } catch let error as HTTPServerError {
                #expect(error == HTTPServerError(.bindFailed, ""))
                #expect(error.reason.contains(reason), "\(error.reason)")
            } catch {
                Issue.record("\(error)")
            }
            #expect(identity(descriptor) != passed, "the descriptor was left open")
        }
    }

    @Test func bindingAPortInUseFails() throws {
        let server = try makeServer()
        defer { server.stop() }
        #expect(throws: HTTPServerError(.bindFailed, "")) {
            _ = try HTTPServer(
                configuration: HTTPServerConfiguration(host: "127.0.0.1", port: server.port), handler: TestHandler())
        }
        #expect(throws: HTTPServerError(.invalidConfiguration, "")) {
            _ = try HTTPServer(configuration: HTTPServerConfiguration(host: "localhost"), handler: TestHandler())
        }
    }
}
