/// The lines of `text` that contain `fragment` (a process's output, read as an operator reads it).
public func lines(in text: String, containing fragment: String) -> [Substring] {
    text.split(separator: "\n").filter { $0.contains(fragment) }
}

/// Waits until at least `count` lines of `output()` contain `fragment`, at most `timeout`; whether they did.
public func waitForLine(
    containing fragment: String, count: Int = 1, within timeout: Duration = .seconds(10), in output: () -> String
) -> Bool {
    Poll.until(within: timeout) { lines(in: output(), containing: fragment).count >= count }
}
