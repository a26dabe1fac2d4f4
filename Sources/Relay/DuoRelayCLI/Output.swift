import Foundation

/// Standard output for command results (keygen's key, check's summary, dev's instructions).
enum Output {
    static func standard(_ text: String) {
        let line = text.hasSuffix("\n") ? text : text + "\n"
        FileHandle.standardOutput.write(Data(line.utf8))
    }

    /// Standard error, lines as given (the usage after a usage error; `Log.line` would flatten them into one).
    static func error(_ text: String) {
        let line = text.hasSuffix("\n") ? text : text + "\n"
        FileHandle.standardError.write(Data(line.utf8))
    }
}
