import Foundation
import RelayCore
import Synchronization

/// The relay's log: whole lines to standard error, each with its time (RFC 3339, UTC), its level and the one
/// `duo-relay` prefix, as text or JSON (`log.format`, ``LogLine``). It carries the start-up summary,
/// configuration problems, operational problems and aggregate counts; never anything from a request.
///
/// Under systemd, when standard error is the journal (`JOURNAL_STREAM` names it), each line starts with the
/// `<N>` syslog priority of its level, which journald takes off and keeps as the entry's priority
/// (`journalctl -p warning` then finds the problems); the time stays in the line so that a line copied out of
/// the journal still says when.
public enum Log {
    public typealias Level = LogLine.Level

    private struct State {
        var format = LogLine.Format.text
        var journal: Bool? = nil
    }

    private static let state = Mutex(State())

    /// The format of every line from now on (from the configuration, at start and on reload).
    public static func use(_ format: LogLine.Format) {
        state.withLock { $0.format = format }
    }

    /// Writes one line: `message` (a leading `duo-relay: ` is the line's own prefix, not repeated; embedded
    /// newlines are flattened so one event is one line), at `level`, as `event` with `fields` in JSON.
    public static func line(
        _ message: String, level: Level = .info, event: String = LogLine.defaultEvent,
        fields: KeyValuePairs<String, String> = [:]
    ) {
        let line = LogLine(
            time: wallClockMilliseconds(), level: level, event: event, message: message,
            fields: fields.map { LogLine.Field($0.key, $0.value) })
        state.withLock { state in
            if state.journal == nil { state.journal = standardErrorIsTheJournal() }
            var text = line.rendered(state.format)
            if state.journal == true { text = "<\(level.syslogPriority)>" + text }
            var bytes = Array(text.utf8)
            bytes.append(0x0a)
            write(bytes)
        }
    }

    private static func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(2, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 {
                    if written < 0 && errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }

    private static func wallClockMilliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(max(0, now.tv_sec)) * 1000 + UInt64(max(0, now.tv_nsec)) / 1_000_000
    }

    /// Whether descriptor 2 is the stream systemd connected to the journal: `JOURNAL_STREAM` is its
    /// `device:inode` (systemd.exec(5)); a descriptor redirected elsewhere (a pipe to another program) is not.
    private static func standardErrorIsTheJournal() -> Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        var status = stat()
        guard fstat(2, &status) == 0 else { return false }
        return value == "\(status.st_dev):\(status.st_ino)"
    }
}
