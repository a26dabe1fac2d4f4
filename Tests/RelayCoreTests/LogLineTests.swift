import RelayCore
import Testing

/// Log lines (docs/DESIGN.md, "Configuration": `log`): an RFC 3339 UTC time, a level and one `duo-relay` prefix in
/// text; one JSON object with time, level, event, message and fields in JSON; either read back by the parser
/// the end-to-end tests run over every line the relay prints.
@Suite struct LogLineTests {
    static let time: UInt64 = 1_796_481_600_123  // 2026-12-05T14:40:00.123Z

    @Test func textIsTimeLevelPrefixAndMessage() {
        let line = LogLine(time: Self.time, level: .info, event: "listening", message: "listening on 127.0.0.1:8787")
        #expect(line.rendered(.text) == "2026-12-05T14:40:00.123Z info duo-relay: listening on 127.0.0.1:8787")
        #expect(LogLine.parse(line.rendered(.text)) == LogLine(time: Self.time, level: .info, message: line.message))
    }

    @Test func theProgramPrefixAppearsOnce() {
        for message in ["duo-relay: reloaded: keys 1", "duo-relay duo-relay: reloaded: keys 1", "reloaded: keys 1"] {
            let line = LogLine(time: 0, level: .warning, message: message)
            #expect(line.message == "reloaded: keys 1")
            #expect(line.rendered(.text) == "1970-01-01T00:00:00.000Z warning duo-relay: reloaded: keys 1")
        }
        #expect(LogLine(time: 0, level: .error, message: "duo-relay dev: cannot start").message == "dev: cannot start")
        // Read back, a second prefix is refused: each line carries exactly one.
        #expect(LogLine.parse("1970-01-01T00:00:00.000Z info duo-relay: duo-relay: x") == nil)
    }

    @Test func jsonIsOneObjectALineWithEveryMember() throws {
        let line = LogLine(
            time: Self.time, level: .warning, event: "apns_problem",
            message: "apns sandbox: cannot connect to APNs: \"refused\"\nnext\tline\u{1}",
            fields: [LogLine.Field("environment", "sandbox"), LogLine.Field("problem", "connect")])
        let json = line.rendered(.json)
        #expect(!json.contains("\n"))
        #expect(
            json == #"{"time":"2026-12-05T14:40:00.123Z","level":"warning","event":"apns_problem","#
                + #""message":"apns sandbox: cannot connect to APNs: \"refused\" next\tline\u0001","#
                + #""fields":{"environment":"sandbox","problem":"connect"}}"#)
        let parsed = try #require(LogLine.parse(json))
        #expect(parsed == line)
        #expect(parsed.rendered(.text).hasPrefix("2026-12-05T14:40:00.123Z warning duo-relay: apns sandbox: "))
    }

    @Test func aLineWithoutAnEventIsAMessage() throws {
        let line = LogLine(time: 0, level: .info, message: "memory allocator: jemalloc 5.3.0")
        let parsed = try #require(LogLine.parse(line.rendered(.json)))
        #expect(parsed.event == "message" && parsed.fields.isEmpty)
        // An event that is not a name (a call site's typo) is the default: the line still reads back.
        for event in ["", "Reload Refused", "reload-refused", String(repeating: "x", count: 65)] {
            let odd = LogLine(time: 0, level: .error, event: event, message: "m")
            #expect(odd.event == "message")
            #expect(LogLine.parse(odd.rendered(.json)) == odd)
        }
    }

    @Test(arguments: [
        "",
        "duo-relay: listening on 127.0.0.1:8787",
        "listening on 127.0.0.1:8787",
        "2026-12-05T14:40:00Z info listening",
        "2026-12-05T14:40:00Z debug duo-relay: x",
        "2026-12-05 14:40:00Z info duo-relay: x",
        "2026-02-30T14:40:00Z info duo-relay: x",
        "2026-12-05T24:40:00Z info duo-relay: x",
        "2026-12-05T14:40:00.1Z info duo-relay: x",
        "2026-12-05T14:40:00+01:00 info duo-relay: x",
        #"{"time":"2026-12-05T14:40:00Z","level":"info","event":"x","message":"m"}"#,
        #"{"time":"2026-12-05T14:40:00Z","level":"info","event":"Bad Event","message":"m","fields":{}}"#,
        #"{"time":"2026-12-05T14:40:00Z","level":"info","event":"x","message":"m","fields":{},"token":"ab"}"#,
        #"{"time":"2026-12-05T14:40:00Z","level":"info","event":"x","message":"m","fields":{"n":1}}"#,
        #"{"time":"yesterday","level":"info","event":"x","message":"m","fields":{}}"#,
    ])
    func whatIsNotALogLine(_ text: String) {
        #expect(LogLine.parse(text) == nil)
    }

    @Test func secondsAndMillisecondsBothRead() {
        #expect(LogLine.parse("2026-12-05T14:40:00Z error duo-relay: x")?.time == Self.time - 123)
        #expect(LogLine.parse("2026-12-05T14:40:00.123Z error duo-relay: x")?.level == .error)
    }

    @Test func levelsMapToSyslogPriorities() {
        #expect(LogLine.Level.allCases.map(\.syslogPriority) == [3, 4, 6])
    }

    /// The time format round-trips over dates that test the calendar: leap days, century years, year ends.
    @Test(
        arguments: [
            0, 951_782_400_000, 951_868_799_999, 1_709_164_800_500, 4_107_542_399_999, 253_402_300_799_999,
        ] as [UInt64])
    func timesRoundTrip(_ milliseconds: UInt64) {
        let text = Timestamp.iso8601(milliseconds: milliseconds)
        #expect(text.count == 24)
        #expect(Timestamp.milliseconds(iso8601: text) == milliseconds, "\(text)")
        #expect(Timestamp.milliseconds(iso8601: Timestamp.iso8601(milliseconds / 1000)) == milliseconds / 1000 * 1000)
    }

    @Test func theConfigurationChoosesTheFormat() throws {
        let base = #""apns":{"topic":"app.openduo.pocket"}"#
        #expect(try RelayConfiguration.parse(Array("{\(base)}".utf8)).logFormat == .text)
        #expect(try RelayConfiguration.parse(Array(#"{\#(base),"log":{"format":"json"}}"#.utf8)).logFormat == .json)
        #expect(try RelayConfiguration.parse(Array(#"{\#(base),"log":{"format":"text"}}"#.utf8)).logFormat == .text)
        let problems = RelayConfiguration.check(Array(#"{\#(base),"log":{"format":"yaml","level":"debug"}}"#.utf8))
            .problems.map(\.description)
        #expect(problems.contains(#"log.format: must be "text" or "json""#), "\(problems)")
        #expect(problems.contains("log.level: is not a known configuration key"), "\(problems)")
        #expect(RelayConfiguration.check(Array(#"{\#(base),"log":"json"}"#.utf8)).problems.count == 1)
    }
}
