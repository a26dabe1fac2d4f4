import Foundation
import Testing

/// README.md's "Layout" table against the folders as they are: a module or a test target added,
/// renamed or removed without its line there fails here.
@Suite("README's layout names every module and test target, and nothing that is gone")
struct LayoutTests {
    static func folders(in parent: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: Repository.url(parent).path).filter { name in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(
                atPath: Repository.url(parent + "/" + name).path, isDirectory: &isDirectory) && isDirectory.boolValue
        }.sorted()
    }

    static func layout() throws -> String {
        Documentation.section("Layout", of: try Repository.text("README.md"))
    }

    @Test func everyModuleInSourcesHasItsLine() throws {
        let layout = try Self.layout()
        let modules = try Self.folders(in: "Sources").filter { $0 != "C" }
        #expect(modules.count > 10, "Sources/ was not read")
        let missing = modules.filter { !layout.contains("`Sources/\($0)/`") }
        #expect(missing.isEmpty, "README's layout lacks these modules")
    }

    @Test func everyTestTargetIsNamed() throws {
        let layout = try Self.layout()
        let targets = try Self.folders(in: "Tests")
        #expect(targets.contains("DeploymentTests"), "Tests/ was not read")
        let missing = targets.filter { !layout.contains("`\($0)`") && !layout.contains("`Tests/\($0)/`") }
        #expect(missing.isEmpty, "README's layout lacks these test targets")
    }

    /// docs/DESIGN.md, "Modules and what each may import": OpenSSL is reached through `TLS` and `RelayCrypto` only.
    /// The tests' helper modules under Tests/Support count too.
    @Test func onlyTLSAndRelayCryptoImportOpenSSL() throws {
        let swiftFiles = (Repository.allFiles(under: "Sources") + Repository.allFiles(under: "Tests/Support"))
            .filter { $0.hasSuffix(".swift") }
        #expect(swiftFiles.count > 50, "Sources/ was not read")
        #expect(swiftFiles.contains { $0.hasPrefix("Tests/Support/RelayTestSupport/") }, "Tests/Support was not read")
        var importers: Set<String> = []
        for path in swiftFiles {
            let lines = try Repository.text(path).split(separator: "\n")
            if lines.contains(where: { $0.trimmingCharacters(in: .whitespaces).hasSuffix("import COpenSSL") }) {
                let parts = path.split(separator: "/")
                importers.insert((parts[0] == "Tests" ? parts[2] : parts[1]).description)
            }
        }
        #expect(importers == ["TLS", "RelayCrypto"], "modules importing COpenSSL: \(importers.sorted())")
    }

    @Test func everyFolderItNamesExists() throws {
        let layout = try Self.layout()
        let pattern = try Regex(#"`((?:Sources|Tests)/[A-Za-z0-9/]+?)/`"#)
        let named = layout.matches(of: pattern).map { String(layout[$0.range].dropFirst().dropLast(2)) }
        #expect(named.count > 10, "no folder names found in the layout")
        let gone = named.filter { path in
            var isDirectory: ObjCBool = false
            return !FileManager.default.fileExists(atPath: Repository.url(path).path, isDirectory: &isDirectory)
                || !isDirectory.boolValue
        }
        #expect(gone.isEmpty, "README's layout names folders that do not exist")
    }
}
