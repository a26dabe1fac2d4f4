/// Reads an HTTP proxy's answer to `CONNECT` (RFC 9110, 9.3.6; RFC 9112, 4 and 5): the status line and the header
/// lines up to the blank line, nothing more. A 2xx answer opens the tunnel, and every byte after the blank line is
/// the tunnelled server's; anything else is a refusal that names the status line. Strict, like the relay's request
/// parser: CRLF line ends only, no obsolete line folding, no control byte, and the head is bounded in size (the
/// stream bounds it in time).
///
/// Pure: bytes in, a result out.
public struct TunnelAnswerParser: Sendable {
    /// What the bytes fed so far amount to.
    public enum Result: Sendable, Equatable {
        /// The head has not ended yet.
        case needsMore
        /// A 2xx answer: the tunnel is open. `leftover` is what followed the blank line (the server's bytes).
        case established(leftover: [UInt8])
        /// Another status: `statusLine` is its code and reason (`407 Proxy Authentication Required`), printable ASCII.
        case refused(statusLine: String)
        /// Not an HTTP answer, or one too large; `reason` says which rule it broke, never the bytes themselves.
        case malformed(reason: String)
    }

    /// The largest head taken: the status line and every header line with their CRLFs and the blank line.
    public static let maximumHeadSize = 8 * 1024
    /// The most header lines taken.
    public static let maximumHeaderLines = 100
    /// The most characters of a refusal's reason phrase that are kept.
    static let maximumReasonLength = 100

    private var head: [UInt8] = []
    private var finished = false

    public init() {}

    /// Takes the next bytes read from the proxy. Once a result other than ``Result/needsMore`` is returned, the parser
    /// is done and returns the same kind of result for no new input.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Result {
        guard !finished else { return .malformed(reason: "the answer was already read") }
        let searchFrom = max(0, head.count - 3)
        head.append(contentsOf: bytes)
        let blank = Self.blankLine(in: head, from: searchFrom)
        // Only the head is checked: what follows the blank line is the server's (TLS records hold any byte).
        if let problem = Self.earlyProblem(in: head[..<(blank.map { $0 + 4 } ?? head.count)]) {
            finished = true
            return .malformed(reason: problem)
        }
        guard let blank else {
            if head.count >= Self.maximumHeadSize {
                finished = true
                return .malformed(reason: "its head is over \(Self.maximumHeadSize) bytes")
            }
            return .needsMore
        }
        finished = true
        let headEnd = blank + 4
        guard headEnd <= Self.maximumHeadSize else {
            return .malformed(reason: "its head is over \(Self.maximumHeadSize) bytes")
        }
        let leftover = Array(head[headEnd...])
        return Self.judge(head[..<(blank + 2)], leftover: leftover)
    }

    /// Takes `bytes`, as ``feed(_:)-(UnsafeRawBufferPointer)``.
    public mutating func feed(_ bytes: [UInt8]) -> Result {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// Where the first CRLF CRLF starts, searching from `start`.
    private static func blankLine(in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var index = start
        while index + 3 < bytes.count {
            if bytes[index] == cr && bytes[index + 1] == lf && bytes[index + 2] == cr && bytes[index + 3] == lf {
                return index
            }
            index += 1
        }
        return nil
    }

    /// A problem visible before the head is complete, so that garbage is refused as soon as it arrives rather than
    /// when the time runs out: a start other than `HTTP/`, a bare LF, or a NUL.
    private static func earlyProblem(in bytes: ArraySlice<UInt8>) -> String? {
        let prefix = Array("HTTP/".utf8)
        for (index, byte) in bytes.prefix(prefix.count).enumerated() where byte != prefix[index] {
            return "it does not start with an HTTP status line"
        }
        for index in bytes.indices {
            if bytes[index] == 0 { return "it holds a NUL byte" }
            if bytes[index] == lf && (index == bytes.startIndex || bytes[index - 1] != cr) {
                return "a line ends in a bare LF"
            }
        }
        return nil
    }

    /// The head's verdict: `head` is every line with its CRLF, without the blank line.
    private static func judge(_ head: ArraySlice<UInt8>, leftover: [UInt8]) -> Result {
        var lines: [ArraySlice<UInt8>] = []
        var start = head.startIndex
        var index = head.startIndex
        while index < head.endIndex {
            if head[index] == cr {
                // Every CR is followed by LF here: the blank line search and the early checks saw to CRLF pairs, and
                // a CR alone is refused.
                guard index + 1 < head.endIndex, head[index + 1] == lf else {
                    return .malformed(reason: "a line holds a bare CR")
                }
                lines.append(head[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        guard let statusLine = lines.first else { return .malformed(reason: "it has no status line") }
        guard lines.count - 1 <= maximumHeaderLines else {
            return .malformed(reason: "it has more than \(maximumHeaderLines) header lines")
        }
        guard let (status, reason) = parseStatusLine(statusLine) else {
            return .malformed(reason: "its status line is not HTTP/1.x, a 3-digit status and a reason")
        }
        for line in lines.dropFirst() {
            if let problem = headerLineProblem(line) { return .malformed(reason: problem) }
        }
        if (200...299).contains(status) { return .established(leftover: leftover) }
        let shown = reason.count > maximumReasonLength ? String(reason.prefix(maximumReasonLength)) + "..." : reason
        return .refused(statusLine: shown.isEmpty ? "\(status)" : "\(status) \(shown)")
    }

    /// `HTTP/1.0` or `HTTP/1.1`, SP, three digits (100 to 599), SP, a reason of printable ASCII (may be empty; the SP
    /// before it too, as some proxies send).
    private static func parseStatusLine(_ line: ArraySlice<UInt8>) -> (Int, String)? {
        let bytes = Array(line)
        let version = Array("HTTP/1.".utf8)
        guard bytes.count >= 12, Array(bytes[0..<7]) == version, bytes[7] == UInt8(ascii: "0") || bytes[7] == one,
            bytes[8] == space
        else { return nil }
        let digits = bytes[9..<12]
        guard digits.allSatisfy({ (zero...nine).contains($0) }) else { return nil }
        let status = digits.reduce(0) { $0 * 10 + Int($1 - zero) }
        guard (100...599).contains(status) else { return nil }
        let rest = bytes[12...]
        guard let first = rest.first else { return (status, "") }
        guard first == space else { return nil }
        let reason = rest.dropFirst()
        guard reason.allSatisfy({ $0 == tab || (space...tilde).contains($0) }) else { return nil }
        return (status, String(decoding: reason, as: UTF8.self))
    }

    /// Why a header line is refused, or nil: a token name followed at once by `:`, a value without control bytes
    /// (HTAB allowed). A line that starts with whitespace (obsolete folding) has no name and is refused.
    private static func headerLineProblem(_ line: ArraySlice<UInt8>) -> String? {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex else {
            return "a header line has no name and colon"
        }
        guard line[line.startIndex..<colon].allSatisfy(isTokenByte) else {
            return "a header name is not a token"
        }
        guard line[(colon + 1)...].allSatisfy({ $0 == tab || $0 >= space && $0 != 0x7F }) else {
            return "a header value holds a control byte"
        }
        return nil
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), zero...nine: true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    private static let cr = UInt8(ascii: "\r")
    private static let lf = UInt8(ascii: "\n")
    private static let space = UInt8(ascii: " ")
    private static let tab = UInt8(ascii: "\t")
    private static let tilde = UInt8(ascii: "~")
    private static let zero = UInt8(ascii: "0")
    private static let one = UInt8(ascii: "1")
    private static let nine = UInt8(ascii: "9")
}
