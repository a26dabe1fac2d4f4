import Testing

@testable import RelayCore

/// `listen`, `apns.proxy` and the APNs origins split `host[:port]` one way (``HostPort``); each refusal names its
/// own key in its own words.
@Suite struct HostPortTests {
    static func refusal(_ members: String, apns: String = "") -> ConfigurationError? {
        do {
            _ = try RelayConfiguration.parse(Array(#"{"apns":{"topic":"a"\#(apns)}\#(members)}"#.utf8))
            return nil
        } catch {
            return error
        }
    }

    @Test func theSplitAndThePort() throws {
        let name = try HostPort("relay.example:8080")
        #expect(name.host == "relay.example" && name.portText == "8080" && !name.isBracketed)
        let literal = try HostPort("[::1]")
        #expect(literal.host == "::1" && literal.portText == nil && literal.isBracketed)
        #expect(try HostPort("[::1]:").portText == "")
        #expect(throws: HostPort.Problem.unclosedBracket) { try HostPort("[::1:80") }
        #expect(throws: HostPort.Problem.notHostPort) { try HostPort("a:b:80") }
        #expect(throws: HostPort.Problem.notHostPort) { try HostPort("[::1]x") }
        #expect(HostPort.port("0") == 0)
        #expect(HostPort.port("65535") == 65535)
        for refused in ["", "65536", "000080", "+80", "8 0", "٨٠"] { #expect(HostPort.port(Substring(refused)) == nil) }
    }

    @Test(arguments: [
        ("[::1:3128", "has an unclosed [ipv6] host", "has an unclosed [ipv6] host", "must be host:port or [ipv6]:port"),
        ("a:b:3128", "must be http://host:port", "must be https://host[:port]", "must be host:port or [ipv6]:port"),
        (
            "127.0.0.1:70000", "has a port that is not 1..65535", "has a port that is not 1 to 65535",
            "must be host:port or [ipv6]:port"
        ),
    ])
    func eachKeyNamesItself(_ authority: String, _ proxy: String, _ origin: String, _ listen: String) {
        let asProxy = Self.refusal("", apns: #","proxy":"http://\#(authority)""#)
        #expect(asProxy?.subject == "apns.proxy")
        #expect(asProxy?.description.contains(proxy) == true, "\(asProxy?.description ?? "accepted")")
        let asOrigin = Self.refusal("", apns: #","sandbox_origin":"https://\#(authority)""#)
        #expect(asOrigin?.subject == "apns.sandbox_origin")
        #expect(asOrigin?.description.contains(origin) == true, "\(asOrigin?.description ?? "accepted")")
        let asListen = Self.refusal(#","listen":"\#(authority)""#)
        #expect(asListen?.subject == "listen")
        #expect(asListen?.description.contains(listen) == true, "\(asListen?.description ?? "accepted")")
    }

    @Test func listenTakesAPortAlwaysAndAnIPv6LiteralOnlyInBrackets() {
        #expect(ListenAddress("127.0.0.1:0") == ListenAddress(host: "127.0.0.1", port: 0))
        #expect(ListenAddress("[::1]:8787") == ListenAddress(host: "::1", port: 8787))
        for refused in ["127.0.0.1", "[::1]", "127.0.0.1:", ":8787", "[127.0.0.1]:8787", "::1:8787", "[::1]8787"] {
            #expect(ListenAddress(refused) == nil, "\(refused)")
        }
    }

    /// `listen: "systemd"` takes the socket the service manager passes; the word is not an address anywhere else.
    @Test func listenTakesSystemd() {
        #expect(Self.refusal(#","listen":"systemd""#) == nil)
        let parsed = try? RelayConfiguration.parse(Array(#"{"apns":{"topic":"a"},"listen":"systemd"}"#.utf8))
        #expect(parsed?.listen.isSystemd == true)
        #expect(ListenAddress.systemd.description == "systemd")
        #expect(Self.refusal(#","listen":"systemd:8787""#)?.subject == "listen")
        #expect(Self.refusal(#","metrics_listen":"systemd""#)?.subject == "metrics_listen")
    }
}
