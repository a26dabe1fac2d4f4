import Foundation
import Glibc
import RelayCrypto

/// What doc-test's and container-test's runs do alike: say what passed on standard output under their name,
/// read the files their tools wrote, and make throwaway secrets.
protocol RecipeRun {
    /// `doc-test` or `container-test`: how every line the run prints begins.
    static var program: String { get }
}

extension RecipeRun {
    /// One line `PROGRAM: TEXT` on standard output.
    func say(_ text: String) {
        let line = "\(Self.program): \(text)\n"
        _ = line.withCString { Glibc.write(STDOUT_FILENO, $0, strlen($0)) }
    }

    /// A file's text; empty if it cannot be read (not written yet).
    func read(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }

    /// A throwaway secret: `count` random bytes in hex.
    static func randomHex(_ count: Int) -> String {
        SecureRandom.bytes(count: count).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}
