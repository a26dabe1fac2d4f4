import RelayCore
import Testing

/// `listen` and `metrics_listen` take an IP address and a port, never a host name (`check` and `serve` refuse a
/// name alike).
@Suite struct ListenAddressTests {
    @Test(arguments: [
        "127.0.0.1", "0.0.0.0", "255.255.255.255", "10.0.0.1", "::", "::1", "fe80::1", "2001:db8::8:800:200c:417a",
        "1:2:3:4:5:6:7:8", "::ffff:192.0.2.1", "1::", "0:0:0:0:0:0:0:0", "1:2:3:4:5:6:1.2.3.4",
    ])
    func addressesAreAccepted(_ host: String) {
        #expect(ListenAddress.isIPAddress(host))
    }

    @Test(arguments: [
        "localhost", "relay.example", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1.2.3.-4", "", ":::",
        "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "fe80::1%eth0", "::g", "1:2:3:4:5:6:7", "1.2.3.4::",
        "::1.2.3", "٣.1.1.1",
    ])
    func namesAndMalformedAddressesAreRefused(_ host: String) {
        #expect(!ListenAddress.isIPAddress(host))
    }

    @Test(arguments: [
        (#""listen":"localhost:8787""#, "listen"),
        (#""metrics_listen":"localhost:9090""#, "metrics_listen"),
        (#""listen":"127.0.0.1:9000","metrics_listen":"127.0.0.1:9000""#, "metrics_listen"),
        (#""listen":"[::]:9000","metrics_listen":"127.0.0.1:9000""#, "metrics_listen"),
        (#""listen":"127.0.0.1:9000","metrics_listen":"0.0.0.0:9000""#, "metrics_listen"),
    ])
    func configurationRefusesThem(_ members: String, _ subject: String) {
        #expect(throws: ConfigurationError(.invalid, subject, "")) {
            try RelayConfiguration.parse(Array(#"{"apns":{"topic":"a"},\#(members)}"#.utf8))
        }
    }

    @Test func distinctPortsOrPortZeroAreFine() throws {
        for members in [
            #""listen":"127.0.0.1:9000","metrics_listen":"127.0.0.1:9001""#,
            #""listen":"127.0.0.1:0","metrics_listen":"127.0.0.1:0""#,
            #""listen":"127.0.0.1:9000","metrics_listen":"127.0.0.2:9000""#,
        ] {
            _ = try RelayConfiguration.parse(Array(#"{"apns":{"topic":"a"},\#(members)}"#.utf8))
        }
    }
}
