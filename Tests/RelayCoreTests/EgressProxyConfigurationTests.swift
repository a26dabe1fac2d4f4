import RelayCrypto
import Testing

@testable import RelayCore

/// `apns.proxy` and `APNS_PROXY_AUTHORIZATION` (docs/DESIGN.md, "Egress proxy"), without a relay.
@Suite struct EgressProxyConfigurationTests {
    func parse(apns: String) throws(ConfigurationError) -> RelayConfiguration {
        try RelayConfiguration.parse(
            Array(#"{"apns":{"topic":"app.example","#.utf8) + Array(apns.utf8) + Array("}}".utf8))
    }

    func failure(_ apns: String) -> ConfigurationError? {
        do {
            _ = try parse(apns: apns)
            return nil
        } catch {
            return error
        }
    }

    @Test func absentOrNullMeansDirect() throws {
        #expect(try RelayConfiguration.parse(Array(#"{"apns":{"topic":"app.example"}}"#.utf8)).apns.proxy == nil)
        #expect(try parse(apns: #""proxy":null"#).apns.proxy == nil)
    }

    @Test(arguments: [
        (#""proxy":"http://127.0.0.1:3128""#, ProxyURL(host: "127.0.0.1", port: 3128), "http://127.0.0.1:3128"),
        (
            #""proxy":"http://Proxy.Internal:8080/""#, ProxyURL(host: "proxy.internal", port: 8080),
            "http://proxy.internal:8080"
        ),
        (#""proxy":"http://[::1]:3128""#, ProxyURL(host: "::1", port: 3128), "http://[::1]:3128"),
    ])
    func aProxyURLIsHostAndPort(apns: String, proxy: ProxyURL, shown: String) throws {
        let parsed = try parse(apns: apns).apns.proxy
        #expect(parsed == proxy)
        #expect(parsed?.description == shown)
    }

    @Test(arguments: [
        (#""proxy":"http://user:secret@127.0.0.1:3128""#, "carries credentials"),
        (#""proxy":"http://user@127.0.0.1:3128""#, "carries credentials"),
        (#""proxy":"https://127.0.0.1:3128""#, "another scheme"),
        (#""proxy":"socks5://127.0.0.1:1080""#, "another scheme"),
        (#""proxy":"127.0.0.1:3128""#, "must be http://host:port"),
        (#""proxy":"http://127.0.0.1""#, "has no port"),
        (#""proxy":"http://127.0.0.1:""#, "not 1..65535"),
        (#""proxy":"http://127.0.0.1:0""#, "not 1..65535"),
        (#""proxy":"http://127.0.0.1:70000""#, "not 1..65535"),
        (#""proxy":"http://:3128""#, "has no host"),
        (#""proxy":"http://127.0.0.1:3128/x""#, "without a path"),
        (#""proxy":"http://127.0.0.1:3128?a=b""#, "without a path"),
        (#""proxy":"http://[::1:3128""#, "unclosed"),
        (#""proxy":"http://[zz]:3128""#, "not an IPv6 address"),
        (#""proxy":"http://a:b:3128""#, "must be http://host:port"),
        (#""proxy":3128"#, "must be a string"),
    ])
    func aBadProxyURLIsRefusedNamingTheKeyNotTheText(apns: String, words: String) {
        let problem = failure(apns)
        #expect(problem?.subject == "apns.proxy")
        #expect(problem?.description.contains(words) == true, "\(problem?.description ?? "accepted")")
        #expect(problem?.description.contains("secret") != true)
    }

    /// Its forms are SecretFormsTests'; a value that is not user:password is refused, never shown.
    @Test func aMalformedAuthorizationIsRefusedWithoutShowingIt() throws {
        var env = SecretFormsTests.requiredEnvironment()
        func load(_ env: [String: String]) throws(ConfigurationError) -> RelaySecrets {
            try SecretFormsTests.load(env, files: [:])
        }
        for bad in ["no-colon", "relay:line\nbreak", "relay:caf\u{E9}"] {
            env["APNS_PROXY_AUTHORIZATION"] = bad
            do {
                _ = try load(env)
                Issue.record("\(bad.debugDescription) was taken")
            } catch {
                #expect(error.subject == "APNS_PROXY_AUTHORIZATION")
                #expect(!error.description.contains(bad))
            }
        }
    }

    @Test func theSummaryNamesTheProxyNeverTheCredentials() throws {
        let relayKey = Base64.urlEncode(SecureRandom.bytes(count: 32))
        let env = [
            "APNS_KEY_SANDBOX": P256.Signing.PrivateKey().pemRepresentation, "APNS_KEY_ID_SANDBOX": "ABCDE12345",
            "APNS_TEAM_ID": "TEAM123456", "RELAY_KEYS": #"{"1":"\#(relayKey)"}"#,
            "APNS_PROXY_AUTHORIZATION": "relay:s3cret",
        ]
        var secrets = try RelaySecrets.load(from: SecretSource(environment: env) { _ in "" })
        var config = try parse(apns: #""proxy":"http://127.0.0.1:3128""#)
        config.grantKeyID = 1
        let summary = try RelaySetup(configuration: config, secrets: secrets).summary
        #expect(
            summary.last
                == "apns proxy: http://127.0.0.1:3128 (CONNECT; Proxy-Authorization: Basic, from APNS_PROXY_AUTHORIZATION)"
        )
        #expect(!summary.joined().contains("s3cret"))
        secrets.apnsProxyAuthorization = nil
        #expect(
            try RelaySetup(configuration: config, secrets: secrets).summary.last
                == "apns proxy: http://127.0.0.1:3128 (CONNECT; Proxy-Authorization: none)")
        config.apns.proxy = nil
        #expect(!(try RelaySetup(configuration: config, secrets: secrets).summary.joined().contains("proxy")))
    }

    @Test func anUnusedProxyVariableIsNamedOnce() throws {
        let direct = try RelayConfiguration.parse(Array(#"{"apns":{"topic":"app.example"}}"#.utf8))
        #expect(RelaySetup.unusedProxyVariableNote(direct, environment: [:]) == nil)
        #expect(RelaySetup.unusedProxyVariableNote(direct, environment: ["HTTPS_PROXY": ""]) == nil)
        #expect(
            RelaySetup.unusedProxyVariableNote(direct, environment: ["HTTPS_PROXY": "http://p:1"])
                == "HTTPS_PROXY set in the environment but not used: APNs is reached directly unless apns.proxy is set")
        #expect(
            RelaySetup.unusedProxyVariableNote(direct, environment: ["HTTPS_PROXY": "http://p:1", "https_proxy": "x"])?
                .hasPrefix("HTTPS_PROXY and https_proxy set") == true)
        let proxied = try parse(apns: #""proxy":"http://127.0.0.1:3128""#)
        #expect(RelaySetup.unusedProxyVariableNote(proxied, environment: ["HTTPS_PROXY": "http://p:1"]) == nil)
    }
}
