import FuzzSupport
import HTTP1

/// The HTTP/1.1 response reader: the same bytes give the same events however they are split (whole, a byte at a
/// time, and in pieces whose sizes come from the input's own hash), with and without the end of input after them,
/// and never a crash. Whatever it takes is well formed: a status of 100 to 599 and a printable reason, fields within
/// the (small) limits, never `chunked` beside `Content-Length` or in HTTP/1.0, no more interim answers than the
/// limit, bodies within theirs (a declared length exactly).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP1ResponseReader(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    HTTP1ResponseReaderTarget.run(fuzzInput(data, size))
    return 0
}

@_cdecl("FuzzHTTP1ResponseReader_main")
public func fuzzHTTP1ResponseReaderMain(
    _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> CInt {
    runLibFuzzer(argc, argv, fuzzHTTP1ResponseReader)
}

enum HTTP1ResponseReaderTarget {
    /// Small limits, so that inputs of a few hundred bytes reach every one of them. The first input byte's low bit
    /// says whether a body may end with the connection.
    static func limits(_ input: [UInt8]) -> HTTP1ResponseReader.Limits {
        HTTP1ResponseReader.Limits(
            maxHeadBytes: 256, maxFieldLines: 8, maxBodyBytes: 100, maxInterimAnswers: 3,
            bodyMayEndWithConnection: (input.first ?? 0) & 1 == 1)
    }

    static func run(_ input: [UInt8]) {
        let limits = limits(input)
        for end in [false, true] {
            let whole = events([input[...]], limits: limits, end: end)
            check(whole, limits: limits)
            if input.count <= 2048 {
                invariant(
                    events(input.indices.map { input[$0...$0] }, limits: limits, end: end) == whole,
                    "a byte at a time differs")
            }
            invariant(events(pieces(input), limits: limits, end: end) == whole, "a split in pieces differs")
        }
    }

    /// Piece sizes from the input's own hash (FNV-1a), so that the seeds stay plain answers.
    static func pieces(_ input: [UInt8]) -> [ArraySlice<UInt8>] {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in input {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3
        }
        var pieces: [ArraySlice<UInt8>] = []
        var start = 0
        while start < input.count {
            hash = hash &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let end = min(input.count, start + Int(hash >> 58) + 1)
            pieces.append(input[start..<end])
            start = end
        }
        return pieces
    }

    /// Every event up to the first failure or the end; every final head's body read (every third as the answer to
    /// a HEAD request, which has none).
    static func events(
        _ pieces: [ArraySlice<UInt8>], limits: HTTP1ResponseReader.Limits, end: Bool
    ) -> [HTTP1ResponseReader.Event] {
        var reader = HTTP1ResponseReader(limits: limits)
        var events: [HTTP1ResponseReader.Event] = []
        var heads = 0
        func drain() -> Bool {
            while true {
                let event = reader.next()
                switch event {
                case .needMoreBytes:
                    return true
                case .head:
                    events.append(event)
                    heads += 1
                    reader.readBody(headRequest: heads % 3 == 0)
                case .interim, .body:
                    events.append(event)
                case .end, .failed:
                    events.append(event)
                    return false
                }
            }
        }
        for piece in pieces {
            reader.append(contentsOf: piece)
            guard drain() else { return events }
        }
        if end {
            reader.finishInput()
            _ = drain()
            invariant(
                {
                    if case .end = events.last { return true }
                    if case .failed = events.last { return true }
                    return false
                }(), "the end of input left the reader waiting")
        }
        return events
    }

    static func check(_ events: [HTTP1ResponseReader.Event], limits: HTTP1ResponseReader.Limits) {
        var interim = 0
        var declared: Int?
        for event in events {
            switch event {
            case .needMoreBytes:
                invariant(false, "needMoreBytes recorded as an event")
            case .interim(let head):
                interim += 1
                invariant(interim <= limits.maxInterimAnswers, "more interim answers than the limit")
                invariant((100...199).contains(head.status), "an interim answer that is not 1xx")
                checkHead(head, limits: limits)
            case .head(let head):
                interim = 0
                invariant((200...599).contains(head.status), "a final answer outside 200 to 599")
                checkHead(head, limits: limits)
                declared = head.contentLength
            case .body(let body):
                invariant(body.count <= limits.maxBodyBytes, "body over its limit")
                if let declared { invariant(body.isEmpty || body.count == declared, "a body not its declared length") }
            case .end, .failed:
                break
            }
        }
    }

    static func checkHead(_ head: HTTP1ResponseHead, limits: HTTP1ResponseReader.Limits) {
        invariant(head.reason.utf8.allSatisfy { $0 == 0x09 || (0x20...0x7E).contains($0) }, "a reason not printable")
        invariant(head.headers.fields.count <= limits.maxFieldLines, "more fields than the limit")
        invariant(!(head.isChunked && head.contentLength != nil), "chunked with a Content-Length")
        invariant(!(head.isChunked && head.version == .http10), "chunked in HTTP/1.0")
        invariant(head.version == .http10 || head.version == .http11, "a version other than HTTP/1.0 and 1.1")
    }
}
