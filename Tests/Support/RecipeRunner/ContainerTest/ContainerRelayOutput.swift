/// What the relay shows outside: its /metrics against the alert rules, and its log against the secrets it was
/// given.
enum ContainerRelayOutput {
    /// The metric names the alert rules read (`duo_relay_...`), sorted, each once.
    static func alertMetricNames(rules: String) -> [String] {
        var names = Set<String>()
        var rest = rules[...]
        while let start = rest.range(of: "duo_relay_") {
            let name = rest[start.lowerBound...].prefix { $0 == "_" || ("a"..."z").contains($0) }
            names.insert(String(name))
            rest = rest[name.endIndex...]
        }
        return names.sorted()
    }

    /// The names among `alertMetricNames` that /metrics (`metrics`, Prometheus text) has no `# TYPE` line for.
    /// The limits store's metrics are there only with a shared store (`sharedStore`), the TLS front's only with `tls`.
    static func missingMetrics(_ metrics: String, rules: String, sharedStore: Bool, tls: Bool = false) -> [String] {
        let typed = Set(
            metrics.split(separator: "\n").compactMap { line -> Substring? in
                guard line.hasPrefix("# TYPE ") else { return nil }
                return line.dropFirst("# TYPE ".count).split(separator: " ").first
            })
        return alertMetricNames(rules: rules).filter { name in
            (sharedStore || !name.hasPrefix("duo_relay_limits_store_")) && (tls || !name.hasPrefix("duo_relay_tls_"))
                && !typed.contains(Substring(name))
        }
    }

    /// Whether `log` holds any of `secrets` (empty ones are no secret). It says only whether: the log line that
    /// holds one is never printed.
    static func holdsASecret(_ log: String, secrets: [String]) -> Bool {
        secrets.contains { !$0.isEmpty && log.contains($0) }
    }
}
