import Glibc

/// One line to standard error, where every check's failure and the usage go.
func printError(_ text: String) {
    let line = text + "\n"
    _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
}
