import Foundation
import HTTP1
import RelayTestSupport
import Testing

/// The parser against h11 (PyPI, a strict HTTP/1.1 implementation; `scripts/install-deps --test` puts it in
/// .build/h11-venv): wherever h11 refuses a request the parser refuses it too, and wherever both accept they agree
/// on method, target, version, header fields and body. The parser refuses more than h11 on purpose only under the
/// rules of ``stricterOnPurpose``.
@Suite("HTTP/1.1 parser against h11")
struct H11DifferentialTests {
    typealias Code = HTTP1ParseError.Code

    /// Where the relay refuses what h11 accepts, on purpose (docs/DESIGN.md, "The HTTP front"), and why h11 differs.
    static let stricterOnPurpose: [Code: String] = [
        .invalidLineEnding: "bare LF line ends: h11 splits lines at LF and drops a CR before it",
        .obsoleteLineFolding: "obs-fold: h11 unfolds continuation lines",
        .invalidFieldValue: "control bytes in values: h11's field-vchar is any byte but NUL and white space",
        .invalidContentLength: "Content-Length repeated (on two lines or as a list) with equal values: h11 keeps one",
        .invalidTransferEncoding: "Transfer-Encoding beside Content-Length, or in HTTP/1.0: h11 takes the chunked body",
        .versionNotSupported: "HTTP/x.y other than 1.0 and 1.1: h11 takes any digit.digit",
        .invalidTarget: "targets other than origin and http(s) absolute form, or with %00: h11 takes any VCHAR run",
        .invalidHost: "Host values that are not a host (empty, spaces, user information): h11 checks the count only",
        .invalidChunkSize:
            "white space after a chunk size with no extension, 17 to 20 hex digits: h11 allows both",
        .invalidRequestLine: "empty lines before the request line: h11 skips them (RFC 9112, 2.2 allows either)",
        .headTooLarge: "the relay's head limits (8 KiB, 100 lines) are below h11's (16 KiB, no line count)",
    ]

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let python = root.appendingPathComponent(".build/h11-venv/bin/python").path
    static let oracle = root.appendingPathComponent("scripts/h11-oracle.py").path

    enum Reading: Equatable {
        case accepted(HTTP1RequestHead, body: [UInt8])
        case refused(Code)
        case incomplete
    }

    static func ours(_ bytes: [UInt8]) -> Reading {
        var parser = HTTP1RequestParser()
        parser.append(contentsOf: bytes)
        var head: HTTP1RequestHead?
        while true {
            switch parser.next() {
            case .needMoreBytes: return .incomplete
            case .head(let read):
                head = read
                parser.readBody(limit: 1 << 20)
            case .body(let body): return head.map { .accepted($0, body: body) } ?? .incomplete
            case .refused(let error, _): return .refused(error.code)
            }
        }
    }

    /// Runs h11 over every request in one process.
    static func h11(_ corpus: [[UInt8]]) throws -> [[String: Any]] {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("h11-corpus-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        let hex = corpus.map { TestHex.string($0) }
        try JSONSerialization.data(withJSONObject: hex).write(to: file)
        let result = try Tool.run(python, [oracle, file.path], timeout: .seconds(120))
        try #require(result.status == 0, "h11-oracle.py failed: \(result.errors)")
        let parsed = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [[String: Any]]
        return try #require(parsed, "h11-oracle.py printed no JSON array")
    }

    @Test func theParserRefusesWhatH11RefusesAndAgreesOnWhatBothAccept() throws {
        try #require(
            Tool.isAvailable(Self.python), "h11 is not installed in .build/h11-venv: run scripts/install-deps --test")
        let corpus = H11Corpus.handWritten.map { Array($0.utf8) } + H11Corpus.generated(count: 1200)
        #expect(corpus.count >= 500)
        let verdicts = try Self.h11(corpus)
        try #require(verdicts.count == corpus.count)

        var tally: [String: Int] = [:]
        var stricter: [Code: Int] = [:]
        for (index, (bytes, verdict)) in zip(corpus, verdicts).enumerated() {
            let theirs = verdict["verdict"] as? String ?? "?"
            let mine = Self.ours(bytes)
            // Requests are named by their index in the corpus, never printed: they hold header values.
            let name = "request \(index) (\(index < H11Corpus.handWritten.count ? "hand-written" : "generated"))"
            switch (theirs, mine) {
            case ("refuse", .refused):
                tally["both refuse", default: 0] += 1
            case ("refuse", _):
                Issue.record("\(name): h11 refuses it, the parser does not (\(mine.summary))")
            case ("accept", .accepted(let head, let body)):
                tally["both accept", default: 0] += 1
                #expect(Self.agree(verdict, head, body), "\(name): h11 and the parser read it differently")
            case ("incomplete", .refused):
                // Refused at a byte h11 has not judged yet (it waits for the whole head).
                tally["refused while h11 waits", default: 0] += 1
            case ("accept", .refused(let code)):
                if Self.stricterOnPurpose[code] == nil {
                    Issue.record("\(name): the parser refuses it (\(code)) under no rule listed as stricter than h11")
                }
                stricter[code, default: 0] += 1
                tally["stricter than h11", default: 0] += 1
            case ("incomplete", .incomplete):
                tally["both wait", default: 0] += 1
            default:
                Issue.record("\(name): h11 says \(theirs), the parser \(mine.summary)")
            }
        }
        // A differential that never sees both sides accept, or both refuse, would prove nothing.
        #expect(tally["both accept", default: 0] >= 100, "\(tally)")
        #expect(tally["both refuse", default: 0] >= 100, "\(tally)")
        print("h11 differential: \(tally); stricter by rule: \(stricter.map { "\($0.key): \($0.value)" }.sorted())")
    }

    static func agree(_ verdict: [String: Any], _ head: HTTP1RequestHead, _ body: [UInt8]) -> Bool {
        func bytes(_ key: String) -> [UInt8]? { (verdict[key] as? String).flatMap { TestHex.decode($0) } }
        guard bytes("method") == Array(head.method.utf8), bytes("target") == Array(head.target.utf8),
            verdict["version"] as? String == (head.version == .http10 ? "1.0" : "1.1"), bytes("body") == body,
            let fields = verdict["headers"] as? [[String]], fields.count == head.headers.fields.count
        else { return false }
        for (pair, field) in zip(fields, head.headers.fields) {
            guard pair.count == 2, let name = TestHex.decode(pair[0]), let value = TestHex.decode(pair[1]) else {
                return false
            }
            // h11 lowercases a Transfer-Encoding value.
            let ours = HTTP1Headers.namesMatch(field.name, "transfer-encoding") ? field.value.lowercased() : field.value
            guard name == Array(field.name.utf8), value == Array(ours.utf8) else { return false }
        }
        return true
    }
}

extension H11DifferentialTests.Reading {
    var summary: String {
        switch self {
        case .accepted: "accepts"
        case .refused(let code): "refuses: \(code)"
        case .incomplete: "waits for more"
        }
    }
}
