import HTTP1
import Testing

/// The connection machine writes the same bytes, and closes alike, however a client's bytes are split into reads
/// (the fuzz target's invariant, on fixed streams, in every test run).
@Suite("HTTP/1.1 connection machine over any split")
struct HTTP1ConnectionSplitTests {
    struct Outcome: Equatable {
        var written: [UInt8] = []
        var closed = false
    }

    /// Serves `pieces` with a handler that answers at once (every third request from its head) and a socket that
    /// writes everything at once, then ends the stream.
    /// `overCap`: the connection was accepted over a cap, and finds room at once when it asks.
    static func serve(_ pieces: [ArraySlice<UInt8>], overCap: Bool = false) -> Outcome {
        var configuration = HTTP1Connection.Configuration()
        configuration.discardableBodyBytes = 16
        var connection = HTTP1Connection(configuration: configuration, now: 0, overCap: overCap)
        var outcome = Outcome()
        var requests = 0
        func carry(_ action: HTTP1Connection.Action) {
            if action.close { outcome.closed = true }
            if let bytes = action.write {
                outcome.written += bytes
                carry(connection.writeFinished(now: 0))
            }
            guard let handUp = action.handUp else { return }
            requests += 1
            switch handUp {
            case .head:
                carry(
                    requests % 3 == 0
                        ? connection.respond(.json(404, "{}"), now: 0) : connection.readBody(limit: 32, now: 0))
            case .request(_, let body):
                carry(connection.respond(HTTP1Response(status: 200, body: body), now: 0))
            case .refused(_, let error, _), .bodyTooLarge(_, let error):
                carry(connection.respond(.refusal(error), now: 0))
            case .admission:
                requests -= 1
                carry(connection.admission(room: true, now: 0))
            }
        }
        for piece in pieces where !connection.isClosed {
            carry(connection.received(piece, now: 0))
        }
        if !connection.isClosed {
            carry(connection.peerClosed(now: 0))
        }
        return outcome
    }

    static let streams = [
        "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nPOST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
            + "POST /3 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhiGET /4 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "POST /1 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok"
            + "POST /2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: v\r\n\r\n"
            + "POST /3 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "POST /1 HTTP/1.1\r\nHost: x\r\nContent-Length: 64\r\n\r\n" + String(repeating: "b", count: 64),
        "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\nContent-Length : 1\r\n\r\nxGET /3 HTTP/1.1\r\n",
        "GET /1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n",
    ]

    @Test(arguments: streams)
    func theSameBytesAreWrittenForEverySplit(stream: String) {
        let bytes = Array(stream.utf8)
        let whole = Self.serve([bytes[...]])
        #expect(whole.closed)
        #expect(!whole.written.isEmpty)
        #expect(Self.serve(bytes.indices.map { bytes[$0...$0] }) == whole, "a byte at a time")
        for cut in 0...bytes.count {
            #expect(Self.serve([bytes[..<cut], bytes[cut...]]) == whole, "split at \(cut)")
        }
    }

    /// A connection accepted over a cap that finds room when its head is in is served as any other, byte for byte.
    @Test(arguments: streams)
    func aConnectionOverACapGivenRoomWritesTheSameBytes(stream: String) {
        let bytes = Array(stream.utf8)
        let whole = Self.serve([bytes[...]])
        #expect(Self.serve([bytes[...]], overCap: true) == whole)
        #expect(Self.serve(bytes.indices.map { bytes[$0...$0] }, overCap: true) == whole, "a byte at a time")
    }
}
