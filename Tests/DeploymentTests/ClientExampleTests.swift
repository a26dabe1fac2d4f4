import Foundation
import RelayTestSupport
import Testing

/// docs/API.md's DuoRelayClient example compiles as written, and the package line beside it names this package
/// and its product, so that a channel can copy both (the example's imports included) and build.
@Suite struct ClientExampleTests {
    /// The ```swift blocks of docs/API.md's "A client for channels" section.
    static func examples() throws -> [String] {
        let section = Documentation.section("A client for channels (Swift)", of: try Repository.text("docs/API.md"))
        return section.components(separatedBy: "```swift\n").dropFirst().compactMap {
            $0.components(separatedBy: "\n```").first
        }
    }

    /// The build folder holding this test bundle, with the modules the build made (`Modules/`).
    static var buildFolder: URL {
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        while url.path != "/" && !url.lastPathComponent.hasSuffix(".xctest") { url.deleteLastPathComponent() }
        return url.deletingLastPathComponent()
    }

    @Test func theSwiftExampleCompilesAsWritten() throws {
        let example = try #require(try Self.examples().first { $0.contains("import DuoRelayClient") })
        #expect(example.contains("import Foundation"))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("duo-relay-example-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("channel.swift")
        try example.write(to: file, atomically: true, encoding: .utf8)
        let modules = Self.buildFolder.appendingPathComponent("Modules").path
        let result = try Tool.run(
            "/usr/bin/env", ["swiftc", "-typecheck", "-swift-version", "6", "-I", modules, file.path],
            timeout: .seconds(120))
        #expect(result.status == 0, "\(result.errors)")
    }

    @Test func thePackageLineNamesThisPackageAndItsProduct() throws {
        let manifest = try #require(try Self.examples().first { $0.contains("import PackageDescription") })
        let root = try Repository.text("Package.swift")
        let name = try #require(root.firstMatch(of: #/let package = Package\(\s*name: "([^"]+)"/#)).1
        #expect(manifest.contains(#".package(path: "../\#(name)")"#), "\(manifest)")
        #expect(manifest.contains(#".product(name: "DuoRelayClient", package: "\#(name)")"#), "\(manifest)")
        #expect(root.contains(#".library(name: "DuoRelayClient", targets: ["DuoRelayClient"])"#))
        // The manifest as written loads, with this repository beside it under the name it uses.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("duo-relay-channel-\(UUID())")
        let channel = directory.appendingPathComponent("channel")
        try FileManager.default.createDirectory(at: channel, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createSymbolicLink(
            at: directory.appendingPathComponent(String(name)), withDestinationURL: Repository.root)
        try manifest.write(to: channel.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        let result = try Tool.run(
            "/usr/bin/env", ["swift", "package", "show-dependencies", "--format", "json"], in: channel,
            timeout: .seconds(120))
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.output.contains(#""name": "\#(name)""#), "\(result.output)")
    }
}
