import DuoRelayClient
import Foundation
import PushClient
import Testing

/// The answer to `duo-relay push`'s request read from bytes, as a connection delivers them, without a socket.
@Suite struct HTTP1AnswerReaderTests {
    /// Feeds `text` in pieces of `piece` bytes; the progress after the last piece, and whether any earlier piece
    /// already ended the answer.
    static func read(_ text: String, piece: Int = .max) -> (progress: HTTP1AnswerReader.Progress, early: Bool) {
        var reader = HTTP1AnswerReader()
        let bytes = Array(text.utf8)
        var progress = HTTP1AnswerReader.Progress.needMore
        var early = false
        var start = 0
        while start < bytes.count {
            if progress != .needMore { early = true }
            let end = min(bytes.count, start + min(piece, bytes.count))
            progress = bytes[start..<end].withUnsafeBytes { reader.read($0) }
            start = end
        }
        return (progress, early)
    }

    static func answer(_ status: Int, _ body: String, retryAfter: String? = nil) -> HTTP1AnswerReader.Progress {
        .complete(RelayAnswer(status: status, retryAfter: retryAfter, body: Data(body.utf8)))
    }

    @Test(
        "an answer framed by Content-Length completes with its last byte, read whole or a byte at a time",
        arguments: [1, 7, Int.max])
    func contentLength(piece: Int) {
        let text =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{\"apns_id\":\"A\"}\n"
        let read = Self.read(text, piece: piece)
        #expect(read.progress == Self.answer(200, "{\"apns_id\":\"A\"}\n"))
        #expect(!read.early)
        #expect(Self.read(String(text.dropLast())).progress == .needMore)
    }

    @Test("a chunked answer's chunks are joined, chunk extensions and trailers skipped", arguments: [1, 5, Int.max])
    func chunked(piece: Int) {
        let text =
            "HTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "9;name=x\r\n{\"error\":\r\n7\r\n\"apns\"}\r\n0\r\nX-Trailer: 1\r\n\r\n"
        #expect(Self.read(text, piece: piece).progress == Self.answer(502, #"{"error":"apns"}"#))
        #expect(Self.read(String(text.dropLast(2))).progress == .needMore)
    }

    @Test("Retry-After is read; repeated fields form one list; names are case-insensitive")
    func fields() {
        let text = "HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\nRETRY-AFTER: 8\r\ncontent-length: 2\r\n\r\n{}"
        #expect(Self.read(text).progress == Self.answer(429, "{}", retryAfter: "7, 8"))
    }

    @Test("interim answers are skipped; 204 and 304 have no body; HTTP/1.0 is read")
    func interimAndBodyless() {
        let text =
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
        #expect(Self.read(text).progress == Self.answer(204, ""))
        #expect(Self.read("HTTP/1.0 304 Not Modified\r\n\r\n").progress == Self.answer(304, ""))
        let interim = String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: 8) + "HTTP/1.1 200 OK\r\n\r\n"
        #expect(Self.read(interim).progress == .malformed("too many interim answers"))
    }

    @Test("an answer framed by the connection's end completes only at the end of input")
    func framedByTheEnd() {
        var reader = HTTP1AnswerReader()
        let text =
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nConnection: close\r\n\r\n{\"error\":\"rate_limited\"}"
        let progress = Array(text.utf8).withUnsafeBytes { reader.read($0) }
        #expect(progress == .needMore)
        #expect(
            reader.endOfInput()
                == RelayAnswer(status: 429, retryAfter: "7", body: Data(#"{"error":"rate_limited"}"#.utf8)))
    }

    @Test("the end of input inside the head or a framed body is no answer")
    func endInside() {
        for text in [
            "", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n",
        ] {
            var reader = HTTP1AnswerReader()
            _ = Array(text.utf8).withUnsafeBytes { reader.read($0) }
            #expect(reader.endOfInput() == nil, "\(text.debugDescription)")
        }
    }

    @Test(
        "bytes that are not an HTTP/1.1 answer are malformed, each with its reason",
        arguments: [
            ("SSH-2.0-OpenSSH_9.6\r\n\r\n", "the answer does not start with an HTTP/1.1 status line"),
            ("HTTP/2 200\r\n\r\n", "the answer does not start with an HTTP/1.1 status line"),
            ("HTTP/1.1 20 OK\r\n\r\n", "the answer does not start with an HTTP/1.1 status line"),
            ("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "a header line of the answer has no colon"),
            ("HTTP/1.1 200 OK\r\nContent-Length: two\r\n\r\n", "the answer's Content-Length is not a number"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "the answer's transfer coding is not chunked"),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                "a chunk size of the answer is not hexadecimal"
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XY",
                "a chunk of the answer does not end with CRLF"
            ),
        ])
    func malformed(text: String, reason: String) {
        #expect(Self.read(text).progress == .malformed(reason))
    }

    @Test("an answer larger than the limit is refused, not kept")
    func bounded() {
        var reader = HTTP1AnswerReader()
        let head = Array("HTTP/1.1 200 OK\r\nContent-Length: \(HTTP1AnswerReader.limit)\r\n\r\n".utf8)
        #expect(head.withUnsafeBytes { reader.read($0) } == .needMore)
        let body = [UInt8](repeating: UInt8(ascii: "a"), count: HTTP1AnswerReader.limit)
        #expect(body.withUnsafeBytes { reader.read($0) } == .malformed("the answer is larger than 256 KiB"))
    }
}
