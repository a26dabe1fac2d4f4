import CLibFuzzer

/// The signature of `LLVMFuzzerTestOneInput`.
public typealias FuzzCallback = @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt

/// Runs libFuzzer's driver with the process arguments.
///
/// Each target defines `<Module>_main` that calls this: SwiftPM links every executable on Linux with
/// `--defsym main=<Module>_main` (for testable executables), and a `-parse-as-library` target has
/// no Swift `main`, so without that symbol the link fails. Calling the driver from it gives
/// exactly what libFuzzer's own `main` would do.
public func runLibFuzzer(
    _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ callback: FuzzCallback
) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, callback)
}

/// The input as an array (libFuzzer owns the buffer only for the call).
public func fuzzInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}

/// Stops the run with a crash that libFuzzer records (with the input) when an invariant fails.
/// The message never contains the input: the saved crash file has it.
public func invariant(
    _ condition: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line
) {
    if !condition { fatalError("invariant violated: " + message(), file: file, line: line) }
}

/// `text` as a Substring that does not start at its string's start (the slow path of code that
/// reads contiguous UTF-8). Framed by UTF-8 offsets, not Characters: a leading combining mark
/// would join a framing Character.
public func offsetSubstring(_ text: String) -> Substring {
    let framed = "{" + text + "}"
    let substring = framed[framed.utf8.index(after: framed.startIndex)..<framed.utf8.index(before: framed.endIndex)]
    invariant(substring.utf8.elementsEqual(text.utf8), "the framed substring is not the text")
    return substring
}
