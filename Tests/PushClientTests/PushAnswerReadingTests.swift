import DuoRelayClient
import Foundation
import PushClient
import Testing

/// The answer to `duo-relay push`'s request read from bytes, as a connection delivers them, without a socket: the
/// exchange reads it with the HTTP/1 response reader (whose own rules are HTTP1Tests' HTTP1ResponseReaderTests).
@Suite struct PushAnswerReadingTests {
    /// Feeds `text` in pieces of `piece` bytes to a connected exchange; the result after the last piece (nil while
    /// the answer is incomplete), and whether any earlier piece already ended the exchange.
    static func read(_ text: String, piece: Int = .max) -> (result: PushExchange.Result?, early: Bool) {
        var exchange = PushExchange()
        exchange.connected()
        let bytes = Array(text.utf8)
        var result: PushExchange.Result?
        var early = false
        var start = 0
        while start < bytes.count {
            if result != nil { early = true }
            let end = min(bytes.count, start + min(piece, bytes.count))
            result = bytes[start..<end].withUnsafeBytes { exchange.read($0) } ?? result
            start = end
        }
        return (result, early)
    }

    static func answer(_ status: Int, _ body: String, retryAfter: String? = nil) -> PushExchange.Result {
        .answered(RelayAnswer(status: status, retryAfter: retryAfter, body: Data(body.utf8)))
    }

    static func malformed(_ reason: String) -> PushExchange.Result { .failed(.malformedAnswer(reason)) }

    @Test(
        "an answer framed by Content-Length completes with its last byte, read whole or a byte at a time",
        arguments: [1, 7, Int.max])
    func contentLength(piece: Int) {
        let text =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{\"apns_id\":\"A\"}\n"
        let read = Self.read(text, piece: piece)
        #expect(read.result == Self.answer(200, "{\"apns_id\":\"A\"}\n"))
        #expect(!read.early)
        #expect(Self.read(String(text.dropLast())).result == nil)
    }

    @Test("a chunked answer's chunks are joined, chunk extensions and trailers skipped", arguments: [1, 5, Int.max])
    func chunked(piece: Int) {
        let text =
            "HTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "9;name=x\r\n{\"error\":\r\n7\r\n\"apns\"}\r\n0\r\nX-Trailer: 1\r\n\r\n"
        #expect(Self.read(text, piece: piece).result == Self.answer(502, #"{"error":"apns"}"#))
        #expect(Self.read(String(text.dropLast(2))).result == nil)
    }

    @Test("Retry-After is read; repeated fields form one list; names are case-insensitive")
    func fields() {
        let text = "HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\nRETRY-AFTER: 8\r\ncontent-length: 2\r\n\r\n{}"
        #expect(Self.read(text).result == Self.answer(429, "{}", retryAfter: "7, 8"))
    }

    @Test("interim answers are skipped; 204 and 304 have no body; HTTP/1.0 is read")
    func interimAndBodyless() {
        let text =
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
        #expect(Self.read(text).result == Self.answer(204, ""))
        #expect(Self.read("HTTP/1.0 304 Not Modified\r\n\r\n").result == Self.answer(304, ""))
        let interim = String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: 8) + "HTTP/1.1 200 OK\r\n\r\n"
        #expect(Self.read(interim).result == Self.malformed("more interim answers than the limit"))
    }

    @Test("an answer framed by the connection's end completes only at the end of input")
    func framedByTheEnd() {
        var exchange = PushExchange()
        exchange.connected()
        let text =
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nConnection: close\r\n\r\n{\"error\":\"rate_limited\"}"
        let progress = Array(text.utf8).withUnsafeBytes { exchange.read($0) }
        #expect(progress == nil)
        #expect(
            exchange.failed(.closedByPeer)
                == .answered(RelayAnswer(status: 429, retryAfter: "7", body: Data(#"{"error":"rate_limited"}"#.utf8))))
    }

    @Test("the end of input inside the head or a framed body is no answer")
    func endInside() {
        for text in [
            "", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n",
        ] {
            var exchange = PushExchange()
            exchange.connected()
            _ = Array(text.utf8).withUnsafeBytes { exchange.read($0) }
            #expect(
                exchange.failed(.closedByPeer) == .failed(.connectionLost("the server closed the connection")),
                "\(text.debugDescription)")
        }
    }

    @Test(
        "bytes that are not an HTTP/1.1 answer are malformed, each with its reason",
        arguments: [
            ("SSH-2.0-OpenSSH_9.6\r\n\r\n", "the status line does not start with HTTP/1.0 or HTTP/1.1"),
            ("HTTP/2 200\r\n\r\n", "the status line does not start with HTTP/1.0 or HTTP/1.1"),
            ("HTTP/1.1 20 OK\r\n\r\n", "the status is not three digits"),
            ("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "a field name not followed at once by a colon"),
            ("HTTP/1.1 200 OK\r\nContent-Length: two\r\n\r\n", "Content-Length that is not ASCII digits"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "a Transfer-Encoding other than one chunked"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size without hex digits"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XY", "chunk data not followed by CRLF"),
        ])
    func malformed(text: String, reason: String) {
        guard case .failed(.malformedAnswer(let said)) = Self.read(text).result else {
            Issue.record("\(text.debugDescription) was not malformed")
            return
        }
        #expect(said == reason)
    }

    @Test("an answer larger than the limit is refused, not kept")
    func bounded() {
        let limit = 256 * 1024
        #expect(
            Self.read("HTTP/1.1 200 OK\r\nContent-Length: \(limit + 1)\r\n\r\n").result
                == Self.malformed("Content-Length over the reader's body limit"))
        var exchange = PushExchange()
        exchange.connected()
        let head = Array("HTTP/1.1 200 OK\r\n\r\n".utf8)
        #expect(head.withUnsafeBytes { exchange.read($0) } == nil)
        let body = [UInt8](repeating: UInt8(ascii: "a"), count: limit + 1)
        guard case .failed(.malformedAnswer(let reason)) = body.withUnsafeBytes({ exchange.read($0) }) else {
            Issue.record("a body past the limit was kept")
            return
        }
        #expect(reason.contains("over the reader's body limit"))
    }
}
