/// Waits until at least `count` of the lines `lines()` gives (a process's log, read as an operator reads it)
/// contain `fragment`, at most `timeout`; whether they did.
public func waitForLine(
    containing fragment: String, count: Int = 1, within timeout: Duration = .seconds(10),
    in lines: () -> [String]
) -> Bool {
    Poll.until(within: timeout) { lines().count { $0.contains(fragment) } >= count }
}
