import APNsSimulator

/// `--fault PREFIX=OUTCOME`, shared by `apns-sim` and `dev`.
extension Usage {
    /// Every value given after `name`, in order (a repeatable option; `check` has already
    /// checked that options and values alternate).
    static func values(_ name: String, in arguments: [String]) throws(UsageError) -> [String] {
        var values: [String] = []
        var index = 0
        while index < arguments.count {
            if arguments[index] == name {
                guard index + 1 < arguments.count, !arguments[index + 1].hasPrefix("--") else {
                    throw UsageError(problem: "\(name) needs a value")
                }
                values.append(arguments[index + 1])
            }
            index += 2
        }
        return values
    }

    /// The `--fault` rules of the command line.
    static func faults(in arguments: [String]) throws(UsageError) -> [TokenFault] {
        var faults: [TokenFault] = []
        for text in try values("--fault", in: arguments) {
            do throws(SimulatorError) {
                faults.append(try TokenFault(parsing: text))
            } catch {
                throw UsageError(problem: "--fault: " + error.reason)
            }
        }
        return faults
    }

    /// The `--help` paragraph on `--fault`.
    static var faultHelp: String {
        let width = (TokenFault.outcomes.map(\.name.count).max() ?? 0) + 2
        let lines = TokenFault.outcomes.map { outcome in
            String(repeating: " ", count: 25) + outcome.name + String(repeating: " ", count: width - outcome.name.count)
                + outcome.summary
        }
        return """
              --fault PREFIX=OUTCOME (repeatable)
                                     every valid push to a device token starting with PREFIX (1 to 64
                                     hex digits, either case; the longest matching prefix wins) gets
                                     OUTCOME instead of a delivery, for example --fault 410=unregistered
                                     --fault 429=too-many-requests --fault 5100=stall --fault 60a=goaway.
                                     Outcomes:
            """ + "\n" + lines.joined(separator: "\n")
    }

    /// One line per rule, for printing which prefixes were set.
    static func describe(_ faults: [TokenFault]) -> String {
        faults.map { fault in
            let name = TokenFault.outcomes.first { $0.fault == fault.fault }?.name ?? "?"
            return "  tokens starting with \(fault.prefix): \(name)"
        }.joined(separator: "\n")
    }
}
