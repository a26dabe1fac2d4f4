import Foundation
import RelayTestSupport

/// Test helper: runs the independent `openssl` command in a private temporary directory.
final class OpenSSLTool {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "relaycrypto-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    func write(_ name: String, _ bytes: [UInt8]) throws { try Data(bytes).write(to: URL(fileURLWithPath: path(name))) }

    func write(_ name: String, _ text: String) throws { try write(name, Array(text.utf8)) }

    func read(_ name: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path(name)))) }

    func readText(_ name: String) throws -> String { String(decoding: try read(name), as: UTF8.self) }

    /// Runs `/usr/bin/openssl arguments` in the directory; returns the exit status and output.
    @discardableResult
    func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try Tool.run("/usr/bin/openssl", arguments, in: directory)
        return (result.status, result.output + result.errors)
    }

    /// Runs and requires exit status 0.
    func succeed(_ arguments: [String]) throws {
        let result = try run(arguments)
        guard result.status == 0 else {
            throw TestFailure("openssl \(arguments.joined(separator: " ")) failed: \(result.output)")
        }
    }
}

/// Test helper: an independent DER codec for ECDSA-Sig-Value (SEQUENCE of two INTEGERs), so the
/// tests do not rely on the conversion code under test.
enum DERSignature {
    static func encode(raw: [UInt8]) -> [UInt8] {
        precondition(raw.count == 64)
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var value = Array(bytes.drop(while: { $0 == 0 }))
            if value.isEmpty { value = [0] }
            if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(raw[0..<32]) + integer(raw[32..<64])
        return [0x30, UInt8(body.count)] + body
    }

    static func decodeToRaw(_ der: [UInt8]) -> [UInt8]? {
        guard der.count >= 8, der[0] == 0x30, Int(der[1]) == der.count - 2 else { return nil }
        var index = 2
        var raw: [UInt8] = []
        for _ in 0..<2 {
            guard index + 2 <= der.count, der[index] == 0x02 else { return nil }
            let length = Int(der[index + 1])
            guard index + 2 + length <= der.count else { return nil }
            let value = der[(index + 2)..<(index + 2 + length)].drop(while: { $0 == 0 })
            guard value.count <= 32 else { return nil }
            raw += [UInt8](repeating: 0, count: 32 - value.count) + value
            index += 2 + length
        }
        return index == der.count ? raw : nil
    }
}
