import RelayCore
import Testing

/// The configuration's JSON reader (through `RelayConfiguration.parse` and `RelaySecrets.parseRelayKeys`): JSON is
/// read exactly, what is not JSON is refused with its position, and a member named twice is refused by name.
@Suite struct JSONParserTests {
    func parse(_ text: String) throws(ConfigurationError) -> RelayConfiguration {
        try RelayConfiguration.parse(Array(text.utf8))
    }

    @Test func stringsNumbersAndEscapesReadAsJSON() throws {
        let config = try parse(
            " { \"apns\" : { \"topic\" : \"app.openduo\\u002Epocket\", \"placeholder\": \"P_\\u0031\" },\r\n"
                + " \"grant_lifetime_s\": 3600, \"grant_key_id\": 0, \"metrics_listen\": null } ")
        #expect(config.apns.topic == "app.openduo.pocket")
        #expect(config.grantLifetimeSeconds == 3600)
        #expect(config.grantKeyID == 0)
        #expect(config.metricsListen == nil)
        #expect(config.apns.placeholder == "P_1")
        // "P\/1" decodes to "P/1", which the placeholder rule then refuses: the escape was read.
        #expect(throws: ConfigurationError(.invalid, "apns.placeholder", "")) {
            try parse(#"{"apns":{"topic":"a","placeholder":"P\/1"}}"#)
        }
    }

    @Test(arguments: [
        (#"{"apns":{"topic":"a"},"\#(String(repeating: "K", count: 43))":1}"#, "config: holds a key that is not"),
        (#"{"apns":{"topic":"a"},"grant_lifetime_s":1e3}"#, "must be an integer"),
        (
            #"{"apns":{"topic":"a"},"grant_lifetime_s":01}"#,
            "line 1, column 43: a number must not start with a leading zero"
        ),
        (#"{"apns":{"topic":"a"},"grant_lifetime_s":-}"#, "line 1, column 43: invalid number"),
        (#"{"apns":{"topic":"a\u12"}}"#, #"line 1, column 24: a \u escape needs four hex digits"#),
        (#"{"apns":{"topic":"a\ud800"}}"#, #"line 1, column 26: a \u escape of a high surrogate"#),
        ("{\"apns\":{\"topic\":\"a\tb\"}}", "line 1, column 20: a control character in a string must be escaped"),
        (#"{"apns":{"topic":"a\x"}}"#, "line 1, column 21: invalid escape"),
        (#"{"apns":{"topic":"a"}"#, "line 1, column 22: expected ',' or '}' after a member"),
        (#"{"apns":{"topic":"a"}}}"#, "line 1, column 23: unexpected text after the JSON value"),
        (#"{"apns":{"topic":"a"},"listen":tru}"#, "line 1, column 35: unexpected character"),
        ("", "line 1, column 1: unexpected end of the text"),
        (String(repeating: "[", count: 100), "nested too deeply"),
    ])
    func refusedWithTheProblem(_ text: String, _ reason: String) {
        do {
            _ = try parse(text)
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.description.contains(reason), "\(error.description)")
        }
    }

    @Test func notUTF8IsRefused() {
        #expect(throws: ConfigurationError.self) {
            try RelayConfiguration.parse(Array(#"{"apns":{"topic":""#.utf8) + [0xff] + Array(#""}}"#.utf8))
        }
    }

    @Test func surrogatePairsAndUnicodeEscapesDecode() throws {
        // A member name spelled with escapes is the same name: given twice, it is refused.
        #expect(throws: ConfigurationError(.duplicateKey, "listen", "")) {
            try parse(#"{"apns":{"topic":"a"},"listen":"1.2.3.4:1","\u006cisten":"1.2.3.4:2"}"#)
        }
        #expect(throws: ConfigurationError(.duplicateKey, "RELAY_KEYS", "")) {
            try RelaySecrets.parseRelayKeys(#"{"1":"x","\u0031":"y"}"#)
        }
        // Outside the BMP: a surrogate pair decodes to the same name as the character itself.
        #expect(throws: ConfigurationError(.duplicateKey, "RELAY_KEYS", "")) {
            try RelaySecrets.parseRelayKeys(#"{"😀":"x","\ud83d\ude00":"y"}"#)
        }
        // An escaped unknown key is shown as it decodes (it looks like a configuration key).
        #expect(throws: ConfigurationError(.unknownKey, "listen_x", "")) {
            try parse(#"{"apns":{"topic":"a"},"\u006cisten_x":1}"#)
        }
    }
}
