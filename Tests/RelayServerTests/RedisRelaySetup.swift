import RedisTestSupport
import RelayCore

@testable import RelayServer

extension RelaySetup {
    /// A relay on a loopback port, with no APNs key, whose limits are counted in `redis` (with its password);
    /// `limits` adds members to the configuration (`"push_limit":{...},`, each followed by a comma).
    static func countingIn(_ redis: RedisServerProcess, keys: RelayKeys, limits: String = "") throws -> RelaySetup {
        let configuration = try RelayConfiguration.parse(
            Array(
                (#"{"listen":"127.0.0.1:0","apns":{"topic":"app.openduo.test"},"server":{"shutdown_grace_s":1},"#
                    + limits
                    + #""limits_store":{"kind":"redis","url":"redis://127.0.0.1:\#(redis.port)/0","#
                    + #""timeout_ms":1000}}"#).utf8))
        var secrets = RelaySecrets(teamID: "TEAM123456", apnsKeys: [:], relayKeys: keys)
        secrets.redisPassword = redis.password
        return try RelaySetup(configuration: configuration, secrets: secrets)
    }
}
