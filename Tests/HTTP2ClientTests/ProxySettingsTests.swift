import Testing

@testable import HTTP2Client

@Suite("HTTP2Client proxy settings")
struct ProxySettingsTests {
    /// RFC 4648, 10: the test vectors of base64.
    @Test(arguments: [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ])
    func basicCredentialsAreStandardBase64(text: String, encoded: String) {
        #expect(ClientSettings.base64(Array(text.utf8)) == encoded)
    }

    @Test func theProxysCredentialsBecomeOneBasicAuthorization() throws {
        var configuration = HTTP2ClientConfiguration(origin: "https://api.push.apple.com")
        #expect(try ClientSettings(configuration: configuration).proxy == nil)
        configuration.proxy = HTTP2ClientConfiguration.Proxy(
            host: "::1", port: 3128, credentials: "Aladdin:open sesame")
        let proxy = try #require(try ClientSettings(configuration: configuration).proxy)
        #expect(proxy.name == "[::1]:3128")
        // RFC 7617, 2's example.
        #expect(ClientSettings.base64(Array("Aladdin:open sesame".utf8)) == "QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
        #expect(configuration.proxy?.name == "[::1]:3128")
    }
}
