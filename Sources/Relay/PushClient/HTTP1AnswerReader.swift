import DuoRelayClient
import Foundation

/// Reads the one HTTP/1.1 answer to `duo-relay push`'s request from the bytes its connection delivers: the
/// status, `Retry-After` and the body, framed by `Content-Length`, by chunked transfer coding or by the end of
/// the connection (what the relay and the fronts in deploy/proxy send). Interim (1xx) answers are skipped.
/// Bounded: an answer larger than ``limit`` is refused, so a misdirected `--relay` cannot fill memory.
public struct HTTP1AnswerReader: Sendable {
    public enum Progress: Equatable, Sendable {
        case needMore
        case complete(RelayAnswer)
        case malformed(String)
    }

    /// The most bytes read for one answer (the relay's are below 1 KiB; a front's error page is larger).
    public static let limit = 256 * 1024

    private var bytes: [UInt8] = []

    public init() {}

    /// Takes the bytes read; says whether the answer is complete.
    public mutating func read(_ more: UnsafeRawBufferPointer) -> Progress {
        guard bytes.count + more.count <= Self.limit else {
            return .malformed("the answer is larger than \(Self.limit / 1024) KiB")
        }
        bytes.append(contentsOf: more)
        return Self.parse(bytes, atEnd: false)
    }

    /// The connection ended: the answer, if what was read is a whole one (a body framed by the end included).
    public func endOfInput() -> RelayAnswer? {
        if case .complete(let answer) = Self.parse(bytes, atEnd: true) { return answer }
        return nil
    }

    private static let endOfLine: [UInt8] = [13, 10]

    static func parse(_ bytes: [UInt8], atEnd: Bool) -> Progress {
        var start = 0
        // Interim answers (100 Continue, 103 Early Hints) come before the final one; a bounded number of them.
        for _ in 0..<8 {
            guard let headEnd = find([13, 10, 13, 10], in: bytes, from: start) else {
                return atEnd ? .malformed("the connection ended inside the answer's head") : .needMore
            }
            let lines = split(bytes[start..<headEnd])
            guard let statusLine = lines.first, let status = statusCode(statusLine) else {
                return .malformed("the answer does not start with an HTTP/1.1 status line")
            }
            var fields: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
                    return .malformed("a header line of the answer has no colon")
                }
                let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
                let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingCharacters(in: .whitespaces)
                // Repeated fields form one list (RFC 9110, 5.3).
                fields[name] = fields[name].map { $0 + ", " + value } ?? value
            }
            let bodyStart = headEnd + 4
            if (100..<200).contains(status) {
                start = bodyStart
                continue
            }
            let body: Progress.Body
            if status == 204 || status == 304 {
                body = .complete([])
            } else if let coding = fields["transfer-encoding"] {
                guard coding.lowercased().split(separator: ",").last?.trimmingCharacters(in: .whitespaces) == "chunked"
                else { return .malformed("the answer's transfer coding is not chunked") }
                body = chunked(bytes, from: bodyStart)
            } else if let length = fields["content-length"] {
                guard let count = Int(length), count >= 0 else {
                    return .malformed("the answer's Content-Length is not a number")
                }
                body = bytes.count - bodyStart >= count ? .complete(Array(bytes[bodyStart..<bodyStart + count])) : .more
            } else {
                body = atEnd ? .complete(Array(bytes[bodyStart...])) : .more
            }
            switch body {
            case .complete(let content):
                return .complete(RelayAnswer(status: status, retryAfter: fields["retry-after"], body: Data(content)))
            case .more:
                return atEnd ? .malformed("the connection ended inside the answer's body") : .needMore
            case .malformed(let reason):
                return .malformed(reason)
            }
        }
        return .malformed("too many interim answers")
    }

    /// "HTTP/1.1 200 OK" (or HTTP/1.0): the three-digit status.
    private static func statusCode(_ line: ArraySlice<UInt8>) -> Int? {
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("HTTP/1.") else { return nil }
        let parts = text.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[1].count == 3, let status = Int(parts[1]), status >= 100 else { return nil }
        return status
    }

    /// The body of a chunked answer starting at `start`: complete (chunks joined, trailers skipped) or not yet.
    private static func chunked(_ bytes: [UInt8], from start: Int) -> Progress.Body {
        var content: [UInt8] = []
        var position = start
        while true {
            guard let lineEnd = find(endOfLine, in: bytes, from: position) else { return .more }
            let sizeText =
                String(decoding: bytes[position..<lineEnd], as: UTF8.self)
                .split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            guard !sizeText.isEmpty, sizeText.count <= 8, let size = Int(sizeText, radix: 16) else {
                return .malformed("a chunk size of the answer is not hexadecimal")
            }
            position = lineEnd + 2
            if size == 0 {
                // Trailer fields, then an empty line.
                while true {
                    guard let end = find(endOfLine, in: bytes, from: position) else { return .more }
                    if end == position { return .complete(content) }
                    position = end + 2
                }
            }
            guard bytes.count >= position + size + 2 else { return .more }
            content.append(contentsOf: bytes[position..<position + size])
            guard bytes[position + size] == 13, bytes[position + size + 1] == 10 else {
                return .malformed("a chunk of the answer does not end with CRLF")
            }
            position += size + 2
        }
    }

    private static func split(_ head: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var position = head.startIndex
        while let end = find(endOfLine, in: head, from: position) {
            lines.append(head[position..<end])
            position = end + 2
        }
        lines.append(head[position...])
        return lines
    }

    private static func find<Bytes: RandomAccessCollection<UInt8>>(
        _ pattern: [UInt8], in bytes: Bytes, from start: Bytes.Index
    ) -> Bytes.Index? where Bytes.Index == Int {
        guard bytes.endIndex - start >= pattern.count else { return nil }
        var index = start
        while index <= bytes.endIndex - pattern.count {
            if bytes[index] == pattern[0] && bytes[index..<index + pattern.count].elementsEqual(pattern) {
                return index
            }
            index += 1
        }
        return nil
    }
}

extension HTTP1AnswerReader.Progress {
    /// How far a body is read.
    enum Body {
        case complete([UInt8])
        case more
        case malformed(String)
    }
}
