import Foundation

/// The report's TLS figures (BenchRun's `tlsFront` section): the relay serving HTTPS itself against its plain front
/// at saturation, against the pair it replaces at 1,000/s (nginx terminating TLS in front of the plain relay, both
/// processes' CPU added), and its memory holding idle TLS connections.
extension BenchReport {
    func tlsFigures() -> [Figure] {
        var list: [Figure] = []
        func add(_ key: String, _ label: String, _ digits: Int, _ value: Double?, json: Bool = true) {
            list.append(Figure(key: key, label: label, digits: digits, inJSON: json, value: value))
        }
        let tlsRPS = median("tls-saturation", "rps")
        let plainRPS = median("tls-paired-plain", "rps")
        add(
            "push_rps_tls", "pushes/s through the relay serving TLS, closed loop, keep-alive, median of rounds", 0,
            tlsRPS)
        add(
            "push_rps_plain_paired", "pushes/s through the plain relay, in rounds alternating with the TLS ones", 0,
            plainRPS)
        add("tls_rps_ratio", "push_rps_tls / push_rps_plain_paired", 2, Self.ratio(tlsRPS, plainRPS))
        add(
            "push_cpu_us_tls", "relay CPU per push serving TLS, saturated", 1,
            median("tls-saturation", "cpu_us", "relay"))
        add(
            "push_cpu_us_plain_paired", "relay CPU per push, plain, in the same pairs of rounds", 1,
            median("tls-paired-plain", "cpu_us", "relay"))
        let relayTLS = median("tls-relay-fixed", "cpu_us", "relay")
        let pairs = runs("tls-pair-fixed")
        let pair = Self.median(pairs.map(Self.withPairSum), ["pair_cpu_us"])
        add("push_cpu_us_tls_at_1000", "relay CPU per push serving TLS at 1,000/s, median of runs", 1, relayTLS)
        add(
            "tls_pair_cpu_us_at_1000", "nginx terminating TLS plus the plain relay behind it: CPU per push at 1,000/s",
            1, pair)
        add(
            "tls_pair_nginx_cpu_us_at_1000", "the pair's nginx worker, CPU per push", 1,
            Self.median(pairs, ["cpu_us", "nginx"]), json: false)
        add(
            "tls_pair_relay_cpu_us_at_1000", "the pair's plain relay, CPU per push", 1,
            Self.median(pairs, ["cpu_us", "relay"]), json: false)
        add(
            "tls_cpu_ratio_to_pair_at_1000", "push_cpu_us_tls_at_1000 / tls_pair_cpu_us_at_1000", 2,
            Self.ratio(relayTLS, pair))
        add(
            "idle_conn_tls_rss_mb", "relay RSS holding the idle keep-alive TLS connections", 1,
            median("idle-tls", "rss_kb").map { $0 / 1024 })
        return list
    }

    /// A pair's run with `pair_cpu_us`: its nginx's and its relay's CPU per push added (absent when either is).
    static func withPairSum(_ run: [String: Any]) -> [String: Any] {
        var run = run
        if let nginx = number(run, "cpu_us", "nginx"), let relay = number(run, "cpu_us", "relay") {
            run["pair_cpu_us"] = NSNumber(value: nginx + relay)
        }
        return run
    }

    /// Every TLS run, in the order run: the two kinds alternate, so a slower stretch of the machine shows in one pair.
    func tlsTable() -> [String] {
        let saturated = zip(runs("tls-saturation"), runs("tls-paired-plain"))
        let fixed = zip(runs("tls-relay-fixed"), runs("tls-pair-fixed").map(Self.withPairSum))
        guard saturated.underestimatedCount > 0 || fixed.underestimatedCount > 0 else { return [] }
        var lines = ["", "The relay serving TLS, run by run (TLS first in each pair):", ""]
        lines += [
            "| round | TLS pushes/s | plain pushes/s | TLS / plain | TLS µs/push | plain µs/push "
                + "| load generator µs/push, TLS | plain |"
        ]
        lines += ["| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for (index, (tls, plain)) in saturated.enumerated() {
            let cells = [
                String(index + 1), Self.format(Self.number(tls, "rps"), 0), Self.format(Self.number(plain, "rps"), 0),
                Self.format(Self.ratio(Self.number(tls, "rps"), Self.number(plain, "rps")), 2),
                Self.format(Self.number(tls, "cpu_us", "relay"), 1),
                Self.format(Self.number(plain, "cpu_us", "relay"), 1),
                Self.format(Self.number(tls, "cpu_us", "load"), 1),
                Self.format(Self.number(plain, "cpu_us", "load"), 1),
            ]
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        lines += [
            "",
            "| run at 1,000/s | relay with tls µs | pair µs (nginx + relay) | relay / pair | relay p99 ms | pair p99 ms |",
        ]
        lines += ["| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for (index, (relay, pair)) in fixed.enumerated() {
            let relayCPU = Self.number(relay, "cpu_us", "relay")
            let pairCPU = Self.number(pair, "pair_cpu_us")
            let cells = [
                String(index + 1), Self.format(relayCPU, 1),
                "\(Self.format(pairCPU, 1)) (\(Self.format(Self.number(pair, "cpu_us", "nginx"), 1)) + "
                    + "\(Self.format(Self.number(pair, "cpu_us", "relay"), 1)))",
                Self.format(Self.ratio(relayCPU, pairCPU), 2), Self.format(Self.number(relay, "p99_ms"), 3),
                Self.format(Self.number(pair, "p99_ms"), 3),
            ]
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        return lines
    }
}
