import EventLoops
import Glibc
import HTTP1
import RelayTestSupport
import Synchronization

@testable import HTTPServer

/// Routes for the tests:
/// - `GET /hello`: answered from `head()`.
/// - `POST /echo`: body up to `limit`, echoed inline from `request()`.
/// - `POST /async`: body up to `limit`; the responder is parked under the `x-id` header until the test answers.
/// - `GET /peer`: the peer as "<family> <bytes>".
/// - `GET /memo`: "kept N" when the connection's memo holds a digest (N, its first word), else "new N" after storing
///   the next number as one.
/// - `/later` (any method): decided later; the pending decision is parked under `x-id` until the test decides it
///   (with `x-decide: now`, decided `.readBody` before `head` returns); a body read is echoed.
/// - anything else: 404, with the method in the body.
final class TestHandler: HTTPHandler {
    let limit: Int
    let parked = Mutex<[String: HTTPResponder]>([:])
    let parkedDecisions = Mutex<[String: PendingHeadDecision]>([:])
    let methodsSeen = Mutex<[String]>([])
    let memosStored = Mutex<UInt64>(0)
    /// The paths ``route(path:)`` was asked for, in order.
    let routed = Mutex<[String]>([])

    init(limit: Int = 64) {
        self.limit = limit
    }

    /// Every path's route is its length in bytes; `request` echoes it in `x-route`.
    func route(path: String) -> Int {
        routed.withLock { $0.append(path) }
        return path.utf8.count
    }

    func head(_ head: HTTPRequestHead) -> HeadDecision {
        methodsSeen.withLock { $0.append(head.method) }
        switch (head.method, head.path) {
        case ("GET", "/hello"), ("HEAD", "/hello"):
            return .respond(.json(200, #"{"hello":"world"}"#))
        case ("POST", "/echo"), ("POST", "/async"):
            return .readBody(limit: limit)
        case (_, "/later"):
            let pending = PendingHeadDecision()
            if head.headers["x-decide"] == "now" {
                pending.decide(.readBody(limit: limit))
            } else {
                parkedDecisions.withLock { $0[head.headers["x-id"] ?? ""] = pending }
            }
            return .later(pending)
        case ("GET", "/peer"):
            let family = head.peer.family == .ipv4 ? "ipv4" : "ipv6"
            let bytes = head.peer.bytes.map(String.init).joined(separator: ".")
            return .respond(HTTP1Response(status: 200, body: Array("\(family) \(bytes)".utf8)))
        case ("GET", "/memo"):
            if let kept = head.peerMemo.digest {
                return .respond(HTTP1Response(status: 200, body: Array("kept \(kept.0)".utf8)))
            }
            let number = memosStored.withLock { stored in
                stored += 1
                return stored
            }
            head.peerMemo.digest = (number, 0, 0, 0)
            return .respond(HTTP1Response(status: 200, body: Array("new \(number)".utf8)))
        default:
            return .respond(.json(404, #"{"error":"not_found","method":"\#(head.method)"}"#))
        }
    }

    func request(_ head: HTTPRequestHead, body: [UInt8], responder: HTTPResponder) {
        if head.path == "/async" {
            parked.withLock { $0[head.headers["x-id"] ?? ""] = responder }
        } else {
            responder.respond(
                HTTP1Response(
                    status: 200,
                    headers: [
                        HTTP1Headers.Field(name: "x-echo", value: "yes"),
                        HTTP1Headers.Field(name: "x-route", value: String(head.route)),
                        // Which worker the head names, and which loop's thread runs this callback.
                        HTTP1Headers.Field(
                            name: "x-worker", value: "\(head.worker) \(EventLoop.current?.name ?? "none")"),
                    ], body: body))
        }
    }

    func bodyTooLarge(_ head: HTTPRequestHead) -> HTTP1Response {
        .json(413, #"{"error":"too_large"}"#)
    }

    /// Waits until the head decision of the request with this `x-id` is parked, and returns it.
    func pendingDecision(_ id: String) throws -> PendingHeadDecision {
        try Poll.wait(for: "head decision \(id) parked", within: .seconds(10)) {
            self.parkedDecisions.withLock { $0[id] } != nil
        }
        return parkedDecisions.withLock { $0[id]! }
    }

    /// Waits until the request with this `x-id` is parked, and returns its responder.
    func responder(_ id: String) throws -> HTTPResponder {
        try Poll.wait(for: "request \(id) parked", within: .seconds(10)) { self.parked.withLock { $0[id] } != nil }
        return parked.withLock { $0[id]! }
    }
}
