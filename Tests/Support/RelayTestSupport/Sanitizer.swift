import Foundation

/// The sanitizer the tests run under: `scripts/sanitize` says which in `DUO_RELAY_SANITIZER` (`address` or `thread`).
public enum Sanitizer {
    /// Nil unless the tests run under `scripts/sanitize`.
    public static let active: String? = ProcessInfo.processInfo.environment["DUO_RELAY_SANITIZER"].flatMap {
        $0.isEmpty ? nil : $0
    }

    /// Whether to make a check that any sanitizer defeats (a rate floor, resident memory): true without one;
    /// under one, false, after printing a line that names the check and why it was skipped, so that a skip is never
    /// silent. Only for such checks: no other assertion depends on the sanitizer.
    public static func allows(_ check: String, because reason: String) -> Bool {
        guard let active else { return true }
        print("skipped under the \(active) sanitizer: \(check) (\(reason))")
        return false
    }
}
