import Foundation
import RelayTestSupport
import Testing

/// The relay's front door on the edges of HTTP: forwarded addresses on several lines, huge declared
/// lengths, oversized targets and headers under the per-address limit, and invalid framing answered in JSON.
@Suite struct FrontDoorTests {
    /// A relay whose per-address limit admits `requests` per minute, then blocks for a minute.
    static func relay(requests: Int, clientIPHeader: String? = nil) throws -> RelayProcess {
        let header = clientIPHeader.map { #","client_ip_header":"\#($0)""# } ?? ""
        return try RelayProcess(
            config: RelayProcess.config(
                extra: #""ip_limit":{"requests":\#(requests),"period_s":60,"block_s":60\#(header)}"#),
            secrets: TestSecrets())
    }

    /// Sends raw request bytes on a new connection and reads one answer.
    static func exchange(_ relay: RelayProcess, _ text: String, timeoutSeconds: Int = 10) throws
        -> RawHTTPClient.Response
    {
        let connection = try RawHTTPClient(port: relay.port, timeoutSeconds: timeoutSeconds)
        try connection.send(Array(text.utf8))
        return try connection.readResponse()
    }

    static func request(_ path: String = "/v1/grant", method: String = "GET", headers headerLines: [String] = [])
        -> String
    {
        "\(method) \(path) HTTP/1.1\r\nHost: relay\r\n" + headerLines.map { $0 + "\r\n" }.joined() + "\r\n"
    }

    /// The header on several lines is one list (RFC 9110, 5.3): the last line's last entry is the address the
    /// trusted proxy appended, whatever lines the client sent before it.
    @Test func forwardedForOnSeveralLinesCountsTheLastLinesLastEntry() throws {
        let relay = try Self.relay(requests: 3, clientIPHeader: "X-Forwarded-For")
        for index in 0..<3 {
            let response = try Self.exchange(
                relay,
                Self.request(headers: [
                    "X-Forwarded-For: 10.0.0.\(index)", "X-Forwarded-For: 10.1.0.\(index), 203.0.113.9",
                ]))
            #expect(response.status == 405, "\(response.text)")
        }
        let blocked = try Self.exchange(
            relay, Self.request(headers: ["X-Forwarded-For: 10.0.0.99", "x-forwarded-for: 192.0.2.1,203.0.113.9"]))
        #expect(blocked.status == 429, "\(blocked.text)")
        #expect(blocked.json?["limit"] as? String == "address" || blocked.error == "rate_limited")
        // Another address the proxy appended has its own count.
        let other = try Self.exchange(
            relay, Self.request(headers: ["X-Forwarded-For: 203.0.113.9", "X-Forwarded-For: 203.0.113.10"]))
        #expect(other.status == 405)
    }

    /// A declared length past 2^63 is over the limit like any other: 413 at once, without waiting for a body.
    @Test(arguments: ["9223372036854775808", "18446744073709551615", "9999999999999999999"])
    func aContentLengthPastTwoToThe63IsAnsweredAtOnce(_ length: String) throws {
        let relay = try Self.relay(requests: 100)
        let started = Date()
        for path in ["/v1/grant", "/v1/push"] {
            let response = try Self.exchange(
                relay, Self.request(path, method: "POST", headers: ["Content-Length: \(length)"]), timeoutSeconds: 5)
            #expect(response.status == 413)
            let limit = path == "/v1/push" ? "8192 bytes, the limit of /v1/push" : "2048 bytes, the limit of /v1/grant"
            #expect(response.text == #"{"error":"too_large","detail":"body: larger than "# + limit + #""}"#)
            #expect(response.headers["content-type"] == "application/json")
        }
        // Where the relay answers from the head alone (a 404), it closes rather than read and drop the body.
        let connection = try RawHTTPClient(port: relay.port, timeoutSeconds: 5)
        try connection.send(Array(Self.request("/v1/x", method: "POST", headers: ["Content-Length: \(length)"]).utf8))
        let answer = try connection.readResponse()
        #expect(answer.status == 404)
        #expect(connection.isClosedByPeer())
        // Wall-clock: a separate relay process, whose only clock is real time; bounded generously.
        #expect(Date().timeIntervalSince(started) < 4)
    }

    /// Every request under /v1/ counts, 414 and 431 too.
    @Test(arguments: ["414", "431"])
    func oversizedRequestsUnderV1Count(_ status: String) throws {
        let relay = try Self.relay(requests: 3)
        let oversized =
            status == "414"
            ? Self.request("/v1/" + String(repeating: "a", count: 4200))
            : Self.request(headers: ["X-Padding: " + String(repeating: "p", count: 4200)])
        for _ in 0..<3 {
            let response = try Self.exchange(relay, oversized)
            #expect(response.status == Int(status)!)
            #expect(response.text == #"{"error":"too_large"}"#)
        }
        #expect(try Self.exchange(relay, Self.request()).status == 429)
        // Outside /v1/ nothing counts: the limit is the API's.
        #expect(try Self.exchange(relay, Self.request("/healthz")).status == 200)
    }

    /// Framing that a lenient parser lets through but no proxy should: the relay answers 400 in its JSON, naming the
    /// rule (docs/DESIGN.md, "The HTTP front"), and closes rather than guess where the body ends. A repeated
    /// `Content-Length` is refused even when the values agree: the contract says "given once".
    @Test(arguments: [
        (["Content-Length: 5", "Content-Length: 6"], "Content-Length: must be ASCII digits, given once"),
        (["Content-Length: 5", "Content-Length: abc"], "Content-Length: must be ASCII digits, given once"),
        (["Content-Length: 38", "Content-Length: 38"], "Content-Length: must be ASCII digits, given once"),
        (
            ["Transfer-Encoding: gzip"],
            "Transfer-Encoding: only one chunked, in HTTP/1.1, and never with Content-Length"
        ),
        (
            ["Transfer-Encoding: gzip, chunked"],
            "Transfer-Encoding: only one chunked, in HTTP/1.1, and never with Content-Length"
        ),
        (
            ["Transfer-Encoding: chunked", "Content-Length: 5"],
            "Transfer-Encoding: only one chunked, in HTTP/1.1, and never with Content-Length"
        ),
    ])
    func invalidFramingIsAnsweredInJSON(_ headerLines: [String], detail: String) throws {
        let relay = try Self.relay(requests: 2)
        let connection = try RawHTTPClient(port: relay.port, timeoutSeconds: 5)
        try connection.send(Array(Self.request(method: "POST", headers: headerLines).utf8))
        let response = try connection.readResponse()
        #expect(response.status == 400)
        #expect(response.text == #"{"error":"bad_request","detail":""# + detail + #""}"#)
        #expect(response.headers["content-type"] == "application/json")
        #expect(connection.isClosedByPeer())
        // Counted under /v1/ like any request.
        _ = try Self.exchange(relay, Self.request(method: "POST", headers: headerLines))
        #expect(try Self.exchange(relay, Self.request()).status == 429)
    }

    /// A transfer coding the relay does not know: 501 in the relay's JSON, and the connection closes.
    @Test func anUnknownTransferCodingIsNotImplemented() throws {
        let relay = try Self.relay(requests: 100)
        let connection = try RawHTTPClient(port: relay.port, timeoutSeconds: 5)
        try connection.send(Array(Self.request(method: "POST", headers: ["Transfer-Encoding: br"]).utf8))
        let response = try connection.readResponse()
        #expect(response.status == 501)
        #expect(response.text.hasPrefix(#"{"error":"not_implemented","detail":"#))
        #expect(connection.isClosedByPeer())
    }
}
