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

    /// `2026-12-30T10:00:00.123Z` for milliseconds since the Unix epoch: RFC 3339, UTC, what log lines carry.
    public static func iso8601(milliseconds: UInt64) -> String {
        let text = iso8601(milliseconds / 1000)
        return text.dropLast() + "." + pad(Int(milliseconds % 1000), 3) + "Z"
    }

    /// Milliseconds since the Unix epoch for `YYYY-MM-DDTHH:MM:SS[.fff]Z` (what ``iso8601(milliseconds:)``
    /// writes, with or without the fraction); nil for anything else.
    public static func milliseconds(iso8601 text: some StringProtocol) -> UInt64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20 || bytes.count == 24, bytes.last == UInt8(ascii: "Z") else { return nil }
        let separators: [(Int, UInt8)] = [
            (4, UInt8(ascii: "-")), (7, UInt8(ascii: "-")), (10, UInt8(ascii: "T")), (13, UInt8(ascii: ":")),
            (16, UInt8(ascii: ":")),
        ]
        guard separators.allSatisfy({ bytes[$0.0] == $0.1 }) else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard byte >= 0x30 && byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60, year >= 1970
        else { return nil }
        var fraction = 0
        if bytes.count == 24 {
            guard bytes[19] == UInt8(ascii: "."), let value = number(20..<23) else { return nil }
            fraction = value
        } else if bytes[19] != UInt8(ascii: "Z") {
            return nil
        }
        // Civil date to days since 1970-01-01 (the inverse of the algorithm in iso8601(_:)).
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = UInt64(days) * 86_400 + UInt64(hour * 3600 + minute * 60 + second)
        // A day that does not exist (February 30) does not come back as written.
        guard iso8601(seconds).hasPrefix(String(decoding: bytes[0..<10], as: UTF8.self)) else { return nil }
        return seconds * 1000 + UInt64(fraction)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
}
