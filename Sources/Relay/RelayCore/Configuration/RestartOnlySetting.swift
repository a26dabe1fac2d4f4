/// One restart-only setting: its configuration key and the properties that hold it.
struct RestartOnlySetting: Sendable {
    let key: String
    /// Puts the running values into `merged`; true when they differ from the values it had.
    private let keepRunning: @Sendable (RelayConfiguration, inout RelayConfiguration) -> Bool

    init<A: Equatable & Sendable>(_ key: String, _ first: WritableKeyPath<RelayConfiguration, A> & Sendable) {
        self.key = key
        keepRunning = { running, merged in
            defer { merged[keyPath: first] = running[keyPath: first] }
            return merged[keyPath: first] != running[keyPath: first]
        }
    }

    init<A: Equatable & Sendable, B: Equatable & Sendable>(
        _ key: String, _ first: WritableKeyPath<RelayConfiguration, A> & Sendable,
        _ second: WritableKeyPath<RelayConfiguration, B> & Sendable
    ) {
        let one = RestartOnlySetting(key, first)
        let other = RestartOnlySetting(key, second)
        self.key = key
        keepRunning = { running, merged in
            // Both kept, whichever differs.
            let changed = one.keep(running, in: &merged)
            return other.keep(running, in: &merged) || changed
        }
    }

    func keep(_ running: RelayConfiguration, in merged: inout RelayConfiguration) -> Bool {
        keepRunning(running, &merged)
    }
}
