import Foundation

/// The provider-token runs' figures (BenchTokenRefresh.swift; BENCHMARKS.md, "The provider token's refresh"): for each
/// key kind, the p99 at 1,000/s without a refresh and with one forced half way, and their ratio. A run counts only when
/// it did what it was meant to: 99 % of its pushes answered 200, and the simulator saw one provider token in a run
/// without a refresh, two in a run with one (else the refresh did not happen, or happened twice).
extension BenchReport {
    /// The runs of one kind of key, without (`token-steady`) or with (`token-refresh`) the forced refresh.
    func tokenRuns(_ key: String, refresh: Bool) -> [[String: Any]] {
        steps.filter { $0.name == (refresh ? "token-refresh" : "token-steady") && $0.data["key"] as? String == key }
            .map(\.data)
    }

    /// Whether a provider-token run did what it was meant to (see the type's comment).
    static func tokenRunCounts(_ run: [String: Any], refresh: Bool) -> Bool {
        succeeded(run) && number(run, "provider_tokens") == (refresh ? 2 : 1)
    }

    /// The median of `path` over the runs; nil if there is none, or one does not count.
    func tokenMedian(_ key: String, refresh: Bool, _ path: String) -> Double? {
        let runs = tokenRuns(key, refresh: refresh)
        guard runs.allSatisfy({ Self.tokenRunCounts($0, refresh: refresh) }) else { return nil }
        return Self.median(runs, [path])
    }

    func tokenFigures() -> [Figure] {
        var list: [Figure] = []
        let kinds = [
            ("token", "the key in a SoftHSM token"),
            ("slow_token", "the key in a SoftHSM token 250 ms slower a signature"), ("file", "the key from a file"),
        ]
        for (key, words) in kinds {
            let steady = tokenMedian(key, refresh: false, "p99_ms")
            let refreshed = tokenMedian(key, refresh: true, "p99_ms")
            list += [
                Figure(
                    key: "\(key)_p99_ms", label: "push latency p99 at 1,000/s, \(words), no refresh", digits: 3,
                    inJSON: true, value: steady),
                Figure(
                    key: "\(key)_refresh_p99_ms",
                    label: "push latency p99 at 1,000/s, \(words), APNs calling the provider token expired half way",
                    digits: 3, inJSON: true, value: refreshed),
                Figure(
                    key: "\(key)_refresh_p99_ratio", label: "\(key)_refresh_p99_ms / \(key)_p99_ms", digits: 2,
                    inJSON: true, value: steady.flatMap { steady in refreshed.map { $0 / steady } }),
                Figure(
                    key: "\(key)_refresh_max_ms",
                    label: "the slowest push of a run with the refresh (the one that got 403 waits for the signature)",
                    digits: 3, inJSON: false, value: tokenMedian(key, refresh: true, "max_ms")),
            ]
        }
        let signed = steps.last { $0.name == "token-sign" }?.data
        list += [
            Figure(
                key: "token_sign_ms", label: "one provider token signed in the SoftHSM token (median of 200)",
                digits: 3,
                inJSON: true, value: signed.flatMap { Self.number($0, "token_p50_ms") }),
            Figure(
                key: "file_sign_ms", label: "one provider token signed with the key from a file (median of 200)",
                digits: 3, inJSON: true, value: signed.flatMap { Self.number($0, "file_p50_ms") }),
        ]
        return list
    }

    /// Every provider-token run in the order it ran: its p99, p99.9 and slowest push, the provider tokens the
    /// simulator saw, and its answers other than 200.
    func tokenTable() -> [String] {
        let runs = steps.filter { $0.name == "token-steady" || $0.name == "token-refresh" }
        guard !runs.isEmpty else { return [] }
        var lines = [
            "",
            "The provider token's refresh (open loop, one worker, one APNs connection; runs in the order they ran):",
            "", "| key | refresh | p99 ms | p99.9 ms | max ms | provider tokens | non-200 | counts |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for run in runs {
            let refresh = run.name == "token-refresh"
            let answered = (run.data["statuses"] as? [String: Any])?.values.compactMap {
                ($0 as? NSNumber)?.doubleValue
            }
            .reduce(0, +)
            let cells = [
                run.data["key"] as? String ?? "", refresh ? "half way" : "none",
                Self.format(Self.number(run.data, "p99_ms"), 3), Self.format(Self.number(run.data, "p999_ms"), 3),
                Self.format(Self.number(run.data, "max_ms"), 3),
                Self.format(Self.number(run.data, "provider_tokens"), 0),
                Self.format(answered.map { $0 - (Self.number(run.data, "statuses", "200") ?? 0) }, 0),
                Self.tokenRunCounts(run.data, refresh: refresh) ? "yes" : "no",
            ]
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        return lines
    }
}
