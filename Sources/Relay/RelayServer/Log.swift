import Foundation
import Synchronization

/// The relay's only output channel: whole lines to standard error. It carries the start-up
/// summary, configuration problems and aggregate counts; never anything from a request.
public enum Log {
    private static let lock = Mutex(())

    /// Writes one line; embedded newlines are flattened so one event is one line.
    public static func line(_ text: String) {
        var bytes = Array(text.utf8.map { $0 == 0x0a || $0 == 0x0d ? 0x20 : $0 })
        bytes.append(0x0a)
        lock.withLock { _ in
            bytes.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(2, buffer.baseAddress! + offset, buffer.count - offset)
                    if written <= 0 {
                        if written < 0 && errno == EINTR { continue }
                        return
                    }
                    offset += written
                }
            }
        }
    }
}
