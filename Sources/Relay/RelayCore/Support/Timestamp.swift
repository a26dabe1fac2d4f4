/// Calendar arithmetic for the one timestamp format the API uses.
public enum Timestamp {
    /// `2026-12-30T10:00:00Z` for Unix seconds (proleptic Gregorian, UTC).
    public static func iso8601(_ seconds: UInt64) -> String {
        let days = Int64(seconds / 86_400)
        let secondOfDay = Int(seconds % 86_400)
        // Days since 1970-01-01 to a civil date (Howard Hinnant's well-known algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return pad(Int(year), 4) + "-" + pad(Int(month), 2) + "-" + pad(Int(day), 2) + "T"
            + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2) + "Z"
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
}
