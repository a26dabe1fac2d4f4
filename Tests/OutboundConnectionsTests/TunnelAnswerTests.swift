import HTTP1
import RelayTestSupport
import Testing

@testable import OutboundConnections

/// A proxy's answer to `CONNECT`, read by the stream's machine through the HTTP/1 response reader: a 2xx opens the
/// tunnel (what follows its blank line is the server's), any other status is a refusal naming its status line, and
/// anything that is not an HTTP answer (or a head too large) is malformed.
@Suite struct TunnelAnswerTests {
    typealias Machine = ClientStreamMachine

    enum Verdict: Equatable {
        case needsMore
        case established(leftover: [UInt8])
        case refused(statusLine: String)
        case malformed(reason: String)
    }

    static let refusedPrefix = "proxy 127.0.0.1:3128 refused the tunnel: "

    /// A machine through a proxy, its TCP connection up and `CONNECT` sent.
    static func tunnelling() -> Machine {
        var machine = Machine(
            host: "api.push.apple.com", port: 443, usesTLS: true,
            proxy: Machine.Proxy(host: "127.0.0.1", port: 3128, authorization: "Basic dTpw"))
        _ = machine.start(now: 0)
        _ = machine.resolved(addressCount: 1)
        _ = machine.connected()
        return machine
    }

    /// What the actions of one read say of the answer.
    static func verdict(_ actions: [Machine.Action]) -> Verdict {
        if actions.isEmpty { return .needsMore }
        if case .startTLS(let leftover) = actions.first { return .established(leftover: leftover) }
        for action in actions {
            guard case .fail(let failure) = action else { continue }
            switch failure.tunnel {
            case .refused where failure.reason.hasPrefix(refusedPrefix):
                return .refused(statusLine: String(failure.reason.dropFirst(refusedPrefix.count)))
            case .malformed: return .malformed(reason: failure.reason)
            default: break
            }
        }
        return .malformed(reason: "unexpected actions \(actions)")
    }

    private func parse(_ text: String, splitAt sizes: [Int] = []) -> Verdict {
        parse(Array(text.utf8), splitAt: sizes)
    }

    /// Feeds `bytes` in pieces of the given sizes (the rest in one piece), returning the first verdict that is not
    /// `needsMore`, or the last.
    private func parse(_ bytes: [UInt8], splitAt sizes: [Int] = []) -> Verdict {
        var machine = Self.tunnelling()
        var offset = 0
        for size in sizes + [bytes.count] {
            let end = min(bytes.count, offset + size)
            let result = Self.verdict(machine.tunnelRead(Array(bytes[offset..<end])))
            offset = end
            if result != .needsMore || offset == bytes.count { return result }
        }
        return .needsMore
    }

    @Test(arguments: [
        "HTTP/1.1 200 Connection established\r\n\r\n",
        "HTTP/1.0 200 Connection established\r\nProxy-agent: tinyproxy/1.11.1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nVia: 1.1 squid\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 204\r\n\r\n",
        "HTTP/1.1 200 \r\n\r\n",
    ])
    func aTwoHundredOpensTheTunnel(answer: String) {
        #expect(parse(answer) == .established(leftover: []))
    }

    @Test func bytesAfterTheBlankLineAreTheServers() {
        // The server's first record may follow the proxy's answer in the same read; it holds any byte (NUL, LF).
        let server: [UInt8] = [0x16, 0x03, 0x03, 0x00, 0x0A, 0x0A, 0x00, 0x0D, 0x0A, 0xFF]
        let bytes = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8) + server
        #expect(parse(bytes) == .established(leftover: server))
        // Split anywhere: the tunnel opens with the read that ends the head, and what that read holds past the blank
        // line is the leftover (the rest comes as the stream's next reads).
        let headCount = bytes.count - server.count
        for split in 1..<bytes.count {
            let expected = split >= headCount ? Array(bytes[headCount..<split]) : server
            #expect(parse(bytes, splitAt: [split]) == .established(leftover: expected), "split at \(split)")
        }
    }

    @Test func anAnswerSplitAnywhereReadsTheSame() {
        let text = "HTTP/1.1 200 Connection established\r\nVia: proxy\r\n\r\n"
        for split in 1..<text.utf8.count {
            #expect(parse(text, splitAt: [split]) == .established(leftover: []), "split at \(split)")
        }
        for size in 1...3 {
            #expect(parse(text, splitAt: Array(repeating: size, count: text.utf8.count)) == .established(leftover: []))
        }
    }

    @Test(arguments: [
        (
            "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"x\"\r\n\r\n",
            "407 Proxy Authentication Required"
        ),
        ("HTTP/1.0 401 Unauthorized\r\n\r\n", "401 Unauthorized"),
        ("HTTP/1.1 403 Forbidden\r\nContent-Length: 10\r\n\r\nforbidden!", "403 Forbidden"),
        ("HTTP/1.1 502 Bad Gateway\r\n\r\n", "502 Bad Gateway"),
        ("HTTP/1.1 100 Continue\r\n\r\n", "100 Continue"),
        ("HTTP/1.1 503\r\n\r\n", "503"),
    ])
    func anotherStatusIsARefusalNamingTheStatusLine(answer: String, statusLine: String) {
        #expect(parse(answer) == .refused(statusLine: statusLine))
    }

    @Test func aLongReasonIsShortenedInTheRefusal() {
        let reason = String(repeating: "r", count: 500)
        guard case .refused(let line) = parse("HTTP/1.1 403 \(reason)\r\n\r\n") else {
            Issue.record("not a refusal")
            return
        }
        #expect(line == "403 " + String(repeating: "r", count: 100) + "...")
    }

    @Test(arguments: MalformedAnswers.heads)
    func aMalformedAnswerIsRefusedAsSuch(answer: String) {
        guard case .malformed = parse(answer) else {
            Issue.record("\(answer.debugDescription) was not refused as malformed: \(parse(answer))")
            return
        }
    }

    @Test func garbageIsRefusedBeforeItsEnd() {
        // A proxy (or something else) that sends no HTTP and no blank line is refused on its first bytes, not when
        // the time runs out.
        var machine = Self.tunnelling()
        guard case .malformed = Self.verdict(machine.tunnelRead(Array("\u{15}\u{03}\u{03}".utf8))) else {
            Issue.record("garbage waited for more")
            return
        }
        var bareLF = Self.tunnelling()
        guard case .malformed = Self.verdict(bareLF.tunnelRead(Array("HTTP/1.1 200 OK\n".utf8))) else {
            Issue.record("a bare LF waited for more")
            return
        }
    }

    @Test func anOversizedHeadIsRefused() {
        let maximumHeadSize = HTTP1ResponseReader.Limits().maxHeadBytes
        var machine = Self.tunnelling()
        #expect(Self.verdict(machine.tunnelRead(Array("HTTP/1.1 200 OK\r\n".utf8))) == .needsMore)
        let line = Array("X-Padding: \(String(repeating: "p", count: 90))\r\n".utf8)
        var result = Verdict.needsMore
        var fed = 17
        while result == .needsMore && fed < 2 * maximumHeadSize {
            result = Self.verdict(machine.tunnelRead(line))
            fed += line.count
        }
        guard case .malformed(let reason) = result else {
            Issue.record("an endless head was not refused: \(result)")
            return
        }
        #expect(reason.contains("the head is over its limit"))
        #expect(fed <= maximumHeadSize + line.count)
        // A head whose blank line comes just past the bound, in one read, is refused too.
        let big = "HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: maximumHeadSize) + "\r\n\r\n"
        guard case .malformed = parse(big) else {
            Issue.record("a head over the bound in one read was taken")
            return
        }
    }

    @Test func tooManyHeaderLinesAreRefused() {
        let maximumHeaderLines = HTTP1ResponseReader.Limits().maxFieldLines
        let lines = String(repeating: "A: b\r\n", count: maximumHeaderLines + 1)
        guard case .malformed = parse("HTTP/1.1 200 OK\r\n" + lines + "\r\n") else {
            Issue.record("101 header lines were taken")
            return
        }
        let allowed = String(repeating: "A: b\r\n", count: maximumHeaderLines)
        #expect(parse("HTTP/1.1 200 OK\r\n" + allowed + "\r\n") == .established(leftover: []))
    }
}
