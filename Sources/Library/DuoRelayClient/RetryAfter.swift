import Foundation

/// Reads a `Retry-After` header (RFC 9110, 10.2.3): delay-seconds or an HTTP-date.
public enum RetryAfter {
    /// The wait the header asks for, from `now`; nil when absent or unreadable. A date in the
    /// past means no wait.
    public static func parse(_ value: String?, now: Date = Date()) -> Duration? {
        guard let text = value?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
        if text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            // Absurdly long values saturate rather than fail.
            return .seconds(Int64(text.prefix(12)) ?? 0)
        }
        guard let date = httpDate().date(from: text) else { return nil }
        return .seconds(max(0, date.timeIntervalSince(now).rounded(.up)))
    }

    /// IMF-fixdate, the form servers must send (`Sun, 06 Nov 1994 08:49:37 GMT`). A new formatter
    /// each time: dates are rare (the relay sends seconds), and a shared one would need a lock.
    private static func httpDate() -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter
    }
}
