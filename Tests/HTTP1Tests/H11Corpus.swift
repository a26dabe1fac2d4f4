import RelayTestSupport

/// The requests of the h11 differential test: hand-written ones for each rule, and generated ones that combine
/// request lines, framing and field lines, with mutations of single bytes and line ends.
enum H11Corpus {
    static let handWritten: [String] = [
        "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /v1/push?x=1 HTTP/1.1\r\nHost: relay.example:8443\r\nAccept: */*\r\n\r\n",
        "GET http://relay.example/v1/push HTTP/1.1\r\nHost: relay.example\r\n\r\n",
        "GET / HTTP/1.0\r\n\r\n",
        "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "POST /v1/grant HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        "POST /v1/grant HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        "POST /v1/grant HTTP/1.1\r\nHost: x\r\nContent-Length: 005\r\n\r\nhello",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: CHUNKED\r\n\r\n5;a=b\r\nhello\r\n0\r\nT: v\r\n\r\n",
        // CL.CL, CL+TE, TE.TE
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\nhello",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        // obs-fold, bare CR / LF, NUL
        "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",
        "GET / HTTP/1.1\r\n Host: x\r\n\r\n",
        "GET / HTTP/1.1\nHost: x\n\n",
        "GET / HTTP/1.1\r\nHost: x\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nX: a\u{0}b\r\n\r\n",
        "GET /a\u{0}b HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nX: a\u{1}b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nX: a\u{7f}\r\n\r\n",
        "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
        // chunk sizes
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n+5\r\nhello\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n 5\r\nhello\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000005\r\nhello\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000000005\r\nhello\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello0\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
        // request line
        "GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET / HTTP/1.1 \r\nHost: x\r\n\r\n",
        "GET / HTTP/2.0\r\nHost: x\r\n\r\n",
        "GET / HTTP/1.2\r\nHost: x\r\n\r\n",
        "GET / http/1.1\r\nHost: x\r\n\r\n",
        "G\"T / HTTP/1.1\r\nHost: x\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
        "CONNECT x:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost:\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 12 34\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\n: empty\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nX:\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nX: \t a \t b \t\r\n\r\n",
    ]

    /// `count` requests made from a fixed seed: the same corpus on every run.
    static func generated(count: Int, seed: UInt64 = 0x5EED_1234) -> [[UInt8]] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in generate(&random) }
    }

    /// Each part of a request, as (well-formed, broken) choices; a generated request takes a broken one for
    /// each part with a small chance, so that most requests are valid and the rest break one or two rules.
    static let methods = (
        ["GET", "POST", "PUT", "HEAD", "BREW", "M-SEARCH", "x!#$%&'*+-.^_`|~"], ["G T", "GET\t", "", "G@T"]
    )
    static let targets = (
        [
            "/", "/v1/push", "/v1/grant?x=1&y", "/a%20b", "/%zz", "http://relay.example/v1/push", "https://h:1/",
            "http://h", "//x", "/~a/b;c=d?e#f",
        ],
        ["*", "relay.example:443", "/a\u{7f}", "/a b", "/\u{0}", "/%00", "ftp://x/", "http://u@h/", "a"]
    )
    static let versions = (
        ["HTTP/1.1", "HTTP/1.1", "HTTP/1.0"], ["HTTP/1.2", "HTTP/2.0", "HTTP/1", "http/1.1", "HTTP/1.1 "]
    )
    static let hosts = (
        [["Host: relay.example"], ["host: [::1]:80"], ["HOST: x:80"], ["Host:  relay.example  "]],
        [[], ["Host: a", "Host: a"], ["Host:"], ["Host: a b"], ["Host: a", "Host: b"]]
    )
    static let extras = (
        [
            "Accept: */*", "X-Empty:", "X-Spaces:   v   ", "X-Tab:\tv\t", "Connection: close", "Connection: keep-alive",
            "X-Obs: caf\u{e9}", "X-Quote: \"a, b\"", "Expect: 100-continue",
        ],
        ["X Y: z", "X-Y : z", "X-Y\t: z", ": v", "X(y): z", "X: a\u{1}b", "X: a\u{7f}"]
    )
    static let lengths = (
        ["5", "05", "0000000005"], ["5, 5", "+5", "-5", "0x5", "5.0", "99999999999999999999999", "", "6"]
    )
    static let chunkSizes = (
        ["5", "05", "5;e=1", "5;e=\"q\"", "0000000000000005"],
        ["0x5", "+5", "5 ", "5 ;e", "5;e\u{1}", "000000000000000000005", "6", "", "-5"]
    )
    static let oddBytes: [UInt8] = [0x00, 0x0D, 0x0A, 0x20, 0x09, 0x7F, 0x80, 0x3A, 0x01, 0xFF]

    static func generate(_ random: inout SplitMix64) -> [UInt8] {
        func pick<T>(_ choices: [T]) -> T { choices[Int(random.next() % UInt64(choices.count))] }
        func chance(_ percent: UInt64) -> Bool { random.next() % 100 < percent }
        func part<T>(_ choices: ([T], [T])) -> T { chance(8) ? pick(choices.1) : pick(choices.0) }

        var lines = ["\(part(methods)) \(part(targets)) \(part(versions))"]
        lines += part(hosts)
        for _ in 0..<Int(random.next() % 3) {
            lines.append(part(extras))
        }
        var body = ""
        switch random.next() % 4 {
        case 0:
            break
        case 1:
            lines.append("Content-Length: \(part(lengths))")
            body = "hello"
            if chance(8) { lines.append("Content-Length: \(part(lengths))") }
        default:
            lines.append(
                chance(92)
                    ? pick(["Transfer-Encoding: chunked", "transfer-encoding: Chunked"])
                    : pick([
                        "Transfer-Encoding: gzip, chunked", "Transfer-Encoding: chunked, chunked",
                        "Transfer-Encoding: br",
                    ]))
            if chance(6) { lines.append("Content-Length: 5") }
            body = "\(part(chunkSizes))\r\nhello\(chance(95) ? "\r\n" : "X\r\n")0\r\n"
            if chance(30) { body += "Trailer-A: \(chance(90) ? "v" : "a\u{1}")\r\n" }
            body += "\r\n"
        }
        if chance(6) { lines.insert(pick([" folded", "\tfolded"]), at: min(2, lines.count)) }
        var bytes = Array((lines.joined(separator: "\r\n") + "\r\n\r\n" + body).utf8)
        if chance(6) {
            // One line end made bare.
            let ends = bytes.indices.filter { bytes[$0] == 0x0D && $0 + 1 < bytes.count && bytes[$0 + 1] == 0x0A }
            if !ends.isEmpty {
                let at = pick(ends)
                if chance(50) { bytes.remove(at: at) } else { bytes.remove(at: at + 1) }
            }
        }
        if chance(6) {
            bytes.insert(pick(oddBytes), at: Int(random.next() % UInt64(bytes.count)))
        }
        if chance(2) { bytes = Array("\r\n".utf8) + bytes }
        return bytes
    }
}
