import HTTP1

/// Feeds a parser bytes in given pieces, setting every body's limit as a handler would, and records its events up
/// to the first refusal.
struct ParserDriver {
    var limits = HTTP1RequestParser.Limits()
    var bodyLimit = 1 << 20

    func events(_ pieces: [ArraySlice<UInt8>]) -> [HTTP1RequestParser.Event] {
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

    /// The events for `bytes` fed whole, after checking that every split gives the same: all 1-byte pieces and
    /// every 2-way split (or, for long inputs, a spread of them). Returns nil if some split disagrees.
    func consistentEvents(_ bytes: [UInt8]) -> [HTTP1RequestParser.Event]? {
        let whole = events([bytes[...]])
        guard events(bytes.indices.map { bytes[$0...$0] }) == whole else { return nil }
        let cuts = bytes.count <= 600 ? Array(0...bytes.count) : Array(stride(from: 0, through: bytes.count, by: 7))
        for cut in cuts where events([bytes[..<cut], bytes[cut...]]) != whole {
            return nil
        }
        // Three pieces, at a few places.
        for first in stride(from: 1, to: bytes.count, by: 13) {
            let second = min(bytes.count, first + 5)
            if events([bytes[..<first], bytes[first..<second], bytes[second...]]) != whole { return nil }
        }
        return whole
    }
}

extension HTTP1RequestParser.Event {
    var head: HTTP1RequestHead? {
        if case .head(let head) = self { return head }
        return nil
    }

    var body: [UInt8]? {
        if case .body(let body) = self { return body }
        return nil
    }

    var refusal: HTTP1ParseError? {
        if case .refused(let error, _) = self { return error }
        return nil
    }
}
