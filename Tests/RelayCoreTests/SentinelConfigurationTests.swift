import RelayCore
import RelayCrypto
import Testing

/// `limits_store.sentinel` (docs/DESIGN.md, "Failover"): read as DESIGN gives it, refused with the key at fault when it
/// cannot work, summarised with the master's name, and its password a secret in every form.
@Suite struct SentinelConfigurationTests {
    let limits = LimitsStoreConfigurationTests()

    @Test func theDesignExampleParses() throws {
        let store = try limits.parse(
            """
            { "kind": "redis",
              "sentinel": { "master": "duo-limits", "nodes": ["10.0.0.1:26379", "10.0.0.2:26379"], "db": 0, "tls": false },
              "username": null, "timeout_ms": 100, "on_failure": "local", "key_prefix": "duo-relay:", "ca_file": null }
            """)
        #expect(store.url == nil)
        #expect(
            store.sentinel
                == RedisSentinel(
                    master: "duo-limits",
                    nodes: [ListenAddress(host: "10.0.0.1", port: 26379), ListenAddress(host: "10.0.0.2", port: 26379)])
        )
        let tls = try limits.parse(
            #"{"kind":"redis","sentinel":{"master":"m","nodes":["[::1]:26380","sentinel.internal:26379"],"db":3,"#
                + #""tls":true},"ca_file":"/ca.pem"}"#)
        #expect(
            tls.sentinel?.nodes == [
                ListenAddress(host: "::1", port: 26380), ListenAddress(host: "sentinel.internal", port: 26379),
            ])
        #expect(tls.sentinel?.database == 3)
        #expect(tls.sentinel?.tls == true)
        #expect(tls.caFile == "/ca.pem")
    }

    @Test(arguments: [
        (#"{"kind":"redis","url":"redis://h","sentinel":{"master":"m","nodes":["h:1"]}}"#, "limits_store"),
        (#"{"kind":"redis","sentinel":{"master":"","nodes":["h:1"]}}"#, "limits_store.sentinel.master"),
        (#"{"kind":"redis","sentinel":{"master":"a b","nodes":["h:1"]}}"#, "limits_store.sentinel.master"),
        (#"{"kind":"redis","sentinel":{"nodes":["h:1"]}}"#, "limits_store.sentinel.master"),
        (#"{"kind":"redis","sentinel":{"master":"m"}}"#, "limits_store.sentinel.nodes"),
        (#"{"kind":"redis","sentinel":{"master":"m","nodes":[]}}"#, "limits_store.sentinel.nodes"),
        (#"{"kind":"redis","sentinel":{"master":"m","nodes":["h"]}}"#, "limits_store.sentinel.nodes"),
        (#"{"kind":"redis","sentinel":{"master":"m","nodes":["h:0"]}}"#, "limits_store.sentinel.nodes"),
        (#"{"kind":"redis","sentinel":{"master":"m","nodes":["::1:26379"]}}"#, "limits_store.sentinel.nodes"),
        (#"{"kind":"redis","sentinel":{"master":"m","nodes":[26379]}}"#, "limits_store.sentinel.nodes"),
        (#"{"kind":"redis","sentinel":{"master":"m","nodes":["h:1"],"db":1024}}"#, "limits_store.sentinel.db"),
        (#"{"kind":"redis","sentinel":{"master":"m","nodes":["h:1"],"tls":"yes"}}"#, "limits_store.sentinel.tls"),
        (#"{"kind":"redis","sentinel":{"master":"m","nodes":["h:1"],"port":1}}"#, "limits_store.sentinel.port"),
        (#"{"kind":"redis","sentinel":{"master":"m","nodes":["h:1"]},"ca_file":"/ca.pem"}"#, "limits_store.ca_file"),
        (#"{"kind":"redis","sentinel":"h:1"}"#, "limits_store.sentinel"),
    ])
    func badBlocksAreRefusedNamingTheKey(block: String, key: String) {
        #expect(limits.failure(block)?.subject == key)
    }

    @Test func neitherURLNorSentinelNamesBoth() {
        let error = limits.failure(#"{"kind":"redis"}"#)
        #expect(error?.subject == "limits_store.url")
        #expect(error?.description.contains("sentinel") == true)
    }

    /// The password's forms are SecretFormsTests'.
    @Test func theSummarySaysSentinelAndTheMasterAndNeverThePassword() throws {
        let secrets = try SecretFormsTests.loadCredential("REDIS_SENTINEL_PASSWORD", "fromsystemd\r\n")
        #expect(secrets.redisSentinelPassword == "fromsystemd")

        let config = try RelayConfiguration.parse(
            Array(
                (#"{"apns":{"topic":"t"},"limits_store":{"kind":"redis","#
                    + #""sentinel":{"master":"duo-limits","nodes":["10.0.0.1:26379","[::1]:26380"]}}}"#).utf8))
        let summary = try RelaySetup(configuration: config, secrets: secrets).summary.last ?? ""
        #expect(summary.hasPrefix("limits store: redis through sentinel duo-limits (10.0.0.1:26379, [::1]:26380)/0"))
        #expect(summary.contains("sentinel AUTH with password"))
        #expect(!summary.contains("fromsystemd"))
    }
}
