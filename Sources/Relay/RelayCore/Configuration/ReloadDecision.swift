/// What a reload (SIGHUP) does with a new configuration: the settings a running relay cannot change (its
/// listeners, limits and server protection, and whether it serves TLS at all) keep their running values until a
/// restart, and are named by configuration key when the new file changes them; everything else (grant settings,
/// APNs, the TLS pair's files, read again) applies at once.
public struct ReloadDecision: Equatable, Sendable {
    /// The configuration to serve with: the new one, with the running restart-only settings.
    public let configuration: RelayConfiguration
    /// The configuration keys whose new values wait for a restart, in the order of ``restartOnly``.
    public let needRestart: [String]

    /// The settings a reload cannot apply, by the configuration key they are named by: the one list both the
    /// comparison and the merge are made from.
    static let restartOnly: [RestartOnlySetting] = [
        RestartOnlySetting("listen", \.listen),
        RestartOnlySetting("metrics_listen", \.metricsListen),
        RestartOnlySetting("push_limit", \.pushLimit),
        // The header names the address the limit counts: part of the limit.
        RestartOnlySetting("ip_limit", \.ipLimit, \.clientIPHeader),
        RestartOnlySetting("server", \.server),
        RestartOnlySetting("limits_store", \.limitsStore),
    ]

    public init(running: RelayConfiguration, new: RelayConfiguration) {
        var merged = new
        var changed: [String] = []
        for setting in Self.restartOnly where setting.keep(running, in: &merged) {
            changed.append(setting.key)
        }
        // The listener speaks TLS or plain HTTP from its start; a new pair (or new paths) is taken at once.
        if (running.tls == nil) != (new.tls == nil) {
            merged.tls = running.tls
            changed.append("tls")
        }
        configuration = merged
        needRestart = changed
    }
}
