import FuzzSupport
import HTTP1

/// The HTTP/1.1 request parser and connection machine: the same bytes give the same events, and the same bytes
/// written back, however they are split (whole, a byte at a time, and in pieces whose sizes come from the input's
/// own hash), and never a crash. Whatever it accepts is
/// well formed (a token method, a path from `/`, framing by one of `Content-Length` or `chunked`, a body within its
/// limit); whatever it refuses answers one of the documented statuses.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP1Parser(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    HTTP1ParserTarget.run(fuzzInput(data, size))
    return 0
}

@_cdecl("FuzzHTTP1Parser_main")
public func fuzzHTTP1ParserMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv, fuzzHTTP1Parser)
}

enum HTTP1ParserTarget {
    /// Small limits, so that inputs of a few hundred bytes reach every one of them.
    static let limits = HTTP1RequestParser.Limits(maxTargetBytes: 64, maxHeadBytes: 512, maxFieldLines: 8)
    static let bodyLimit = 100

    static func run(_ input: [UInt8]) {
        let whole = events([input[...]])
        check(whole)
        if input.count <= 2048 {
            invariant(events(input.indices.map { input[$0...$0] }) == whole, "a byte at a time differs")
        }
        // Piece sizes from the input's own hash (FNV-1a), so that the seeds stay plain requests.
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in input {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3
        }
        var pieces: [ArraySlice<UInt8>] = []
        var start = 0
        while start < input.count {
            hash = hash &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let length = Int(hash >> 58) + 1
            let end = min(input.count, start + length)
            pieces.append(input[start..<end])
            start = end
        }
        invariant(events(pieces) == whole, "a split in pieces differs")

        let served = HTTP1ConnectionTarget.run([input[...]])
        invariant(served.closed, "the connection outlived its client's end of stream")
        invariant(HTTP1ConnectionTarget.run(pieces) == served, "the connection wrote otherwise for a split")
        if input.count <= 512 {
            invariant(
                HTTP1ConnectionTarget.run(input.indices.map { input[$0...$0] }) == served,
                "the connection wrote otherwise a byte at a time")
        }
    }

    static func events(_ pieces: [ArraySlice<UInt8>]) -> [HTTP1RequestParser.Event] {
        var parser = HTTP1RequestParser(limits: limits)
        var events: [HTTP1RequestParser.Event] = []
        for piece in pieces {
            parser.append(contentsOf: piece)
            while true {
                let event = parser.next()
                switch event {
                case .needMoreBytes:
                    break
                case .head:
                    events.append(event)
                    parser.readBody(limit: bodyLimit)
                    continue
                case .body:
                    events.append(event)
                    continue
                case .refused:
                    events.append(event)
                    return events
                }
                break
            }
        }
        return events
    }

    static func check(_ events: [HTTP1RequestParser.Event]) {
        for event in events {
            switch event {
            case .needMoreBytes:
                invariant(false, "needMoreBytes recorded as an event")
            case .head(let head):
                invariant(!head.method.isEmpty && head.method.utf8.allSatisfy(isToken), "method is not a token")
                invariant(head.path.hasPrefix("/"), "path does not start with /")
                invariant(head.target.utf8.count <= limits.maxTargetBytes, "target over its limit")
                invariant(!(head.isChunked && head.contentLength != nil), "chunked with a Content-Length")
                invariant(!(head.isChunked && head.version == .http10), "chunked in HTTP/1.0")
                invariant(head.version == .http10 || head.headers["host"] != nil, "HTTP/1.1 without Host")
                invariant(head.headers.fields.count <= limits.maxFieldLines, "more fields than the limit")
            case .body(let body):
                invariant(body.count <= bodyLimit, "body over its limit")
            case .refused(let error, _):
                invariant([400, 413, 414, 431, 501, 505].contains(error.status), "refusal with another status")
            }
        }
    }

    static func isToken(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        default: Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }
}

/// The connection machine over the same input, with a handler that reads every body and answers every request and
/// refusal at once, and a socket that writes everything at once: the bytes written and whether the connection
/// ends do not depend on how the input was split either.
enum HTTP1ConnectionTarget {
    struct Outcome: Equatable {
        var written: [UInt8] = []
        var closed = false
    }

    static func run(_ pieces: [ArraySlice<UInt8>]) -> Outcome {
        var configuration = HTTP1Connection.Configuration(limits: HTTP1ParserTarget.limits)
        configuration.discardableBodyBytes = 16
        var connection = HTTP1Connection(configuration: configuration, now: 0)
        var outcome = Outcome()
        var requests = 0
        func carry(_ action: HTTP1Connection.Action) {
            if action.close { outcome.closed = true }
            // The write first (a 100 Continue may come with the request it preceded), then the hand-up.
            if let bytes = action.write {
                outcome.written += bytes
                carry(connection.writeFinished(now: 0))
            }
            guard let handUp = action.handUp else { return }
            requests += 1
            switch handUp {
            case .head(let head):
                // Every third request is answered from its head; the others read their body.
                carry(
                    requests % 3 == 0
                        ? connection.respond(.json(404, "{}"), now: 0)
                        : connection.readBody(limit: head.method == "PUT" ? 4 : 100, now: 0))
            case .request(_, let body):
                carry(connection.respond(HTTP1Response(status: 200, body: body), now: 0))
            case .refused(_, let error, _), .bodyTooLarge(_, let error):
                carry(connection.respond(.refusal(error), now: 0))
            case .admission:
                // Not asked: this connection counts against no cap.
                carry(connection.admission(room: true, now: 0))
            }
        }
        for piece in pieces {
            guard !connection.isClosed else { break }
            carry(connection.received(piece, now: 0))
        }
        if !connection.isClosed {
            carry(connection.peerClosed(now: 0))
        }
        return outcome
    }
}
