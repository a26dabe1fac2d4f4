import RelayTestSupport

extension RelayProcess {
    /// The messages of the relay's log lines (``logMessages``) that contain `text`.
    func lines(containing text: String) -> [String] {
        logMessages.filter { $0.contains(text) }
    }

    /// Waits until at least `count` of the relay's log messages contain `text`, at most `timeout`.
    func waitForLine(_ text: String, count: Int = 1, within timeout: Duration = .seconds(10)) -> Bool {
        RelayTestSupport.waitForLine(containing: text, count: count, within: timeout) { logMessages }
    }
}
