import HTTP1
import Synchronization
import Testing

@testable import HTTPServer

@Suite("SocketPeer and HTTPHeaders")
struct SocketPeerTests {
    @Test func parsesIPv4() throws {
        let peer = try #require(SocketPeer.parse("192.0.2.7"))
        #expect(peer.family == .ipv4)
        #expect(peer.bytes == [192, 0, 2, 7])
    }

    @Test func parsesIPv6() throws {
        let peer = try #require(SocketPeer.parse("2001:db8::1"))
        #expect(peer.family == .ipv6)
        #expect(peer.bytes == [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1])
        #expect(SocketPeer.parse("::1")?.bytes == Array(repeating: 0, count: 15) + [1])
    }

    @Test func mapsIPv4MappedIPv6ToIPv4() throws {
        let peer = try #require(SocketPeer.parse("::ffff:10.1.2.3"))
        #expect(peer.family == .ipv4)
        #expect(peer.bytes == [10, 1, 2, 3])
        #expect(peer == SocketPeer.parse("10.1.2.3"))
    }

    @Test(arguments: ["", "1.2.3", "256.1.1.1", "example.org", "[::1]", "1.2.3.4:80", "::g"])
    func rejectsNonAddresses(_ text: String) {
        #expect(SocketPeer.parse(text) == nil)
    }

    @Test func neverPrintsTheAddress() throws {
        let peer = try #require(SocketPeer.parse("203.0.113.9"))
        #expect(peer.description == "<redacted>")
        #expect("\(peer)" == "<redacted>")
        #expect(!String(reflecting: peer).contains("203"))
        var dumped = ""
        dump(peer, to: &dumped)
        #expect(!dumped.contains("203"))
    }

    @Test func headerLookupIgnoresCase() {
        let headers = HTTPHeaders([("Content-Type", "a"), ("X-Forwarded-For", "1"), ("x-forwarded-for", "2")])
        #expect(headers["content-type"] == "a")
        #expect(headers["CONTENT-TYPE"] == "a")
        #expect(headers["content-typ"] == nil)
        #expect(headers.values("X-FORWARDED-FOR") == ["1", "2"])
    }
}

@Suite("HTTPResponder without a server")
struct HTTPResponderTests {
    @Test func closureResponderAnswersOnce() {
        let seen = Mutex<[Int]>([])
        let responder = HTTPResponder { response in seen.withLock { $0.append(response.status) } }
        responder.respond(.json(201, "{}"))
        responder.respond(.json(500, "{}"))
        #expect(seen.withLock { $0 } == [201])
    }

    @Test func jsonResponseSetsTheContentType() {
        let response = HTTP1Response.json(
            429, #"{"error":"rate_limited"}"#, headers: [HTTP1Headers.Field(name: "retry-after", value: "10")])
        #expect(response.status == 429)
        #expect(response.headers.map(\.name) == ["content-type", "retry-after"])
        #expect(response.headers.first?.value == "application/json")
        #expect(response.body == Array(#"{"error":"rate_limited"}"#.utf8))
    }
}
