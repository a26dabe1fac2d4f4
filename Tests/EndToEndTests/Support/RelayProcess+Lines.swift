import RelayTestSupport

extension RelayProcess {
    /// The lines of the relay's standard error that contain `text`.
    func lines(containing text: String) -> [Substring] {
        RelayTestSupport.lines(in: standardError, containing: text)
    }

    /// Waits until at least `count` lines of the relay's standard error contain `text`, at most `timeout`.
    func waitForLine(_ text: String, count: Int = 1, within timeout: Duration = .seconds(10)) -> Bool {
        RelayTestSupport.waitForLine(containing: text, count: count, within: timeout) { standardError }
    }
}
