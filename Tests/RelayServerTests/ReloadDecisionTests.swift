import RelayCore
import Testing

/// What SIGHUP applies at once and what waits for a restart, by configuration key (the `reloaded:` line).
@Suite struct ReloadDecisionTests {
    static func configuration(_ json: String, apns: String = #""topic":"app.openduo.test""#) throws
        -> RelayConfiguration
    {
        try RelayConfiguration.parse(Array((#"{"apns":{"# + apns + "}" + json + "}").utf8))
    }

    @Test func anUnchangedFileNeedsNoRestart() throws {
        let running = try Self.configuration(#","push_limit":{"requests":5}"#)
        let decision = ReloadDecision(running: running, new: running)
        #expect(decision.needRestart.isEmpty)
        #expect(decision.configuration == running)
    }

    @Test(arguments: [
        (#","listen":"127.0.0.1:9000""#, "listen"),
        (#","metrics_listen":"127.0.0.1:9100""#, "metrics_listen"),
        (#","push_limit":{"requests":5}"#, "push_limit"),
        (#","ip_limit":{"block_s":0}"#, "ip_limit"),
        (#","ip_limit":{"client_ip_header":"X-Forwarded-For"}"#, "ip_limit"),
        (#","server":{"threads":4}"#, "server"),
        (#","limits_store":{"kind":"redis","url":"redis://127.0.0.1:6379"}"#, "limits_store"),
    ])
    func aRestartOnlySettingKeepsItsRunningValueAndIsNamed(_ change: String, _ key: String) throws {
        let running = try Self.configuration("")
        let decision = ReloadDecision(running: running, new: try Self.configuration(change))
        #expect(decision.needRestart == [key])
        #expect(decision.configuration == running)
    }

    @Test func reloadableSettingsApplyAtOnceBesideTheRestartOnlyOnes() throws {
        let running = try Self.configuration("")
        let new = try Self.configuration(
            #","grant_key_id":2,"grant_lifetime_s":600,"server":{"threads":3},"listen":"127.0.0.1:1""#,
            apns: #""topic":"app.openduo.other","timeout_ms":500"#)
        let decision = ReloadDecision(running: running, new: new)
        #expect(decision.needRestart == ["listen", "server"])
        #expect(decision.configuration.grantKeyID == 2)
        #expect(decision.configuration.grantLifetimeSeconds == 600)
        #expect(decision.configuration.apns == new.apns)
        #expect(decision.configuration.listen == running.listen)
        #expect(decision.configuration.server == running.server)
    }
}

extension ReloadDecisionTests {
    static let tls = #","tls":{"certificate_file":"/etc/relay/fullchain.pem","key_file":"/etc/relay/privkey.pem"}"#

    /// The listener speaks TLS or plain HTTP from its start: turning `tls` on or off waits for a restart.
    @Test(arguments: [("", tls), (tls, "")])
    func turningTLSOnOrOffWaitsForARestart(_ running: String, _ new: String) throws {
        let running = try Self.configuration(running)
        let decision = ReloadDecision(running: running, new: try Self.configuration(new))
        #expect(decision.needRestart == ["tls"])
        #expect(decision.configuration == running)
    }

    /// New paths for the pair are taken at once (the files are read again on every reload anyway).
    @Test func newPathsForThePairApplyAtOnce() throws {
        let running = try Self.configuration(Self.tls)
        let moved = try Self.configuration(
            #","tls":{"certificate_file":"/etc/relay/new.pem","key_file":"/etc/relay/new.key"}"#)
        let decision = ReloadDecision(running: running, new: moved)
        #expect(decision.needRestart.isEmpty)
        #expect(decision.configuration.tls?.certificateFile == "/etc/relay/new.pem")
    }
}
