import Foundation

/// The records a soak keeps (`--keep DIR`: `attempts.csv` and `samples.csv`) read back, so that the phones' budgets of
/// a kept run can be judged again (`duo-relay-load soak-budgets --records DIR`) after the accounting changes, without
/// running the hour again.
enum SoakRecords {
    /// The attempts of `attempts.csv` (a column added later reads as empty in older files).
    static func attempts(_ text: String) throws -> [SoakAttempt] {
        try rows(text, header: "route").map { fields throws(LoadError) in
            func number(_ index: Int) throws(LoadError) -> Double {
                guard index < fields.count, let value = Double(fields[index]) else {
                    throw LoadError(.failed, "attempts.csv: column \(index + 1) is not a number")
                }
                return value
            }
            func text(_ index: Int) -> String? { index < fields.count && !fields[index].isEmpty ? fields[index] : nil }
            let ending: SoakAttempt.Ending =
                switch fields[6] {
                case "answered": .answered
                case "closed": .closed
                default: .timedOut
                }
            return SoakAttempt(
                route: fields[0] == "grant" ? .grant : .push, push: Int(try number(1)), phone: Int(try number(2)),
                relay: Int(try number(3)), sent: try number(4), ended: try number(5), ending: ending,
                status: Int(try number(7)), error: text(8), limit: text(9), apnsReason: text(11),
                retryAfter: text(10).flatMap { Int($0) })
        }
    }

    /// The samples of `samples.csv`.
    static func samples(_ text: String) throws -> [SoakSample] {
        try rows(text, header: "at").map { fields throws(LoadError) in
            guard fields.count >= 7, let at = Double(fields[0]), let relay = Int(fields[1]),
                let incarnation = Int(fields[2]), let rss = Int(fields[3]), let descriptors = Int(fields[4]),
                let threads = Int(fields[5])
            else { throw LoadError(.failed, "samples.csv: a row is not a sample") }
            return SoakSample(
                at: at, relay: relay, incarnation: incarnation, rssKilobytes: rss, descriptors: descriptors,
                threads: threads, limits: fields[6].isEmpty ? nil : fields[6],
                fallbacks: fields.count > 7 ? Int(fields[7]) : nil)
        }
    }

    private static func rows(_ text: String, header: String) throws(LoadError) -> [[String]] {
        var lines = text.split(separator: "\n")
        guard let first = lines.first, first.hasPrefix(header + ",") else {
            throw LoadError(.failed, "not a soak's records file (its header does not start with \(header))")
        }
        lines.removeFirst()
        return lines.map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
    }

    /// `soak-budgets --records DIR`: the phones' budgets of the kept run judged again; one line per broken budget,
    /// then one JSON line; exits 1 when one is broken.
    static func judge(_ options: Arguments) throws -> Int32 {
        let directory = try options.string("records")
        let attempts = try Self.attempts(BenchRun.read(directory + "/attempts.csv"))
        let samples = try Self.samples(BenchRun.read(directory + "/samples.csv"))
        let policy = SoakPolicy(
            deadline: Double(SoakRun.apnsTimeoutMilliseconds) / 1000 + 5, phoneLimit: SoakRun.phoneLimit,
            phonePeriod: SoakRun.phonePeriod, instances: 2)
        let accounting = SoakAccounting(policy: policy, attempts: attempts, deliveries: [], samples: samples)
        let (violations, phones, unplaced) = accounting.budgets()
        for violation in violations { LoadCommand.write("soak-budgets: BROKEN: \(violation.detail)", to: 2) }
        LoadCommand.write(
            #"{"phones_checked":\#(phones),"phones_unplaced":\#(unplaced),"budget_violations":\#(violations.count)}"#)
        return violations.isEmpty ? 0 : 1
    }
}
