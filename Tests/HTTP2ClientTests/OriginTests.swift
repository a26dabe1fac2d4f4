import Testing

@testable import HTTP2Client

@Suite("HTTP2Client origins")
struct OriginTests {
    @Test(arguments: [
        ("https://api.push.apple.com", "api.push.apple.com", 443, "api.push.apple.com", false),
        (
            "https://API.Sandbox.Push.Apple.com:2197", "api.sandbox.push.apple.com", 2197,
            "api.sandbox.push.apple.com:2197", false
        ),
        ("https://127.0.0.1:8443", "127.0.0.1", 8443, "127.0.0.1:8443", true),
        ("https://[::1]:8443", "::1", 8443, "[::1]:8443", true),
        ("https://[::1]", "::1", 443, "[::1]", true),
    ])
    func validOriginsAreSplit(_ text: String, _ host: String, _ port: Int, _ authority: String, _ isAddress: Bool)
        throws
    {
        let origin = try #require(Origin(text))
        #expect(origin.host == host)
        #expect(Int(origin.port) == port)
        #expect(origin.authority == authority)
        #expect(origin.isAddress == isAddress)
    }

    @Test(arguments: [
        "http://example.com", "https://", "https://example.com/", "https://example.com/3/device",
        "https://example.com?x",
        "https://user@example.com", "https://example.com:0", "https://example.com:65536", "https://example.com:",
        "https://example.com:44a", "https://[::1", "https://[::1]x", "https://::1", "https://exa mple.com",
        "https://example.com#frag", "https://:443",
    ])
    func malformedOriginsAreRejected(_ text: String) {
        #expect(Origin(text) == nil)
    }
}
