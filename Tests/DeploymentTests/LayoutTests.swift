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

    /// Every module folder: `Sources/LAYER/MODULE` (the C modules included) and `Benchmarks/MODULE`.
    static func modules() throws -> [String] {
        var modules: [String] = []
        for layer in try folders(in: "Sources") {
            modules += try folders(in: "Sources/" + layer).map { "Sources/\(layer)/\($0)" }
        }
        return modules + (try folders(in: "Benchmarks").map { "Benchmarks/\($0)" })
    }

    /// The layers a push passes through, and nothing else: the benchmark and the load tool are not the product.
    @Test func sourcesHoldsAtMostEightLayersAndNoBenchmark() throws {
        let layers = try Self.folders(in: "Sources")
        #expect(layers.count >= 5, "Sources/ was not read")
        #expect(layers.count <= 8, "Sources/ has \(layers.count) top-level folders: \(layers)")
        let tools = try Self.modules().filter {
            $0.hasPrefix("Sources/") && ($0.contains("Load") || $0.contains("Bench"))
        }
        #expect(tools.isEmpty, "benchmark code under Sources/: \(tools)")
    }

    @Test func everyModuleInSourcesHasItsLine() throws {
        let layout = try Self.layout()
        let modules = try Self.modules().filter { !$0.hasPrefix("Sources/C/") }
        #expect(modules.count > 10, "Sources/ was not read")
        let missing = modules.filter { !layout.contains("`\($0)/`") }
        #expect(missing.isEmpty, "README's layout lacks these modules")
    }

    @Test func everyTestTargetIsNamed() throws {
        let layout = try Self.layout()
        let targets = try Self.folders(in: "Tests")
        #expect(targets.contains("DeploymentTests"), "Tests/ was not read")
        let missing = targets.filter { !layout.contains("`\($0)`") && !layout.contains("`Tests/\($0)/`") }
        #expect(missing.isEmpty, "README's layout lacks these test targets")
    }

    /// The Swift files of every module, keyed by module name: Sources, Benchmarks and the tests' helpers.
    static func filesByModule() throws -> [String: [String]] {
        let swiftFiles =
            (Repository.allFiles(under: "Sources") + Repository.allFiles(under: "Benchmarks")
            + Repository.allFiles(under: "Tests/Support"))
            .filter { $0.hasSuffix(".swift") }
        var byModule: [String: [String]] = [:]
        for path in swiftFiles {
            // Sources/LAYER/MODULE/..., Tests/Support/MODULE/..., Benchmarks/MODULE/...
            let parts = path.split(separator: "/")
            let module = parts[0] == "Benchmarks" ? parts[1] : parts[2]
            byModule[String(module), default: []].append(path)
        }
        return byModule
    }

    /// The modules a module's files import.
    static func imports(of files: [String]) throws -> Set<String> {
        var imported: Set<String> = []
        for path in files {
            for line in try Repository.text(path).split(separator: "\n") {
                let words = line.trimmingCharacters(in: .whitespaces).split(separator: " ")
                // `import X`, `@testable import X`, `public import X`, `import struct X.Y`.
                guard let at = words.firstIndex(of: "import"), at + 1 < words.count else { continue }
                let target =
                    words[at + 1] == "struct" || words[at + 1] == "enum" || words[at + 1] == "class"
                    ? words.dropFirst(at + 2).first : words[at + 1]
                if let target, at == 0 || words[0].hasPrefix("@") || words[0] == "public" || words[0] == "internal" {
                    imported.insert(String(target.split(separator: ".")[0]))
                }
            }
        }
        return imported
    }

    /// docs/DESIGN.md, "Modules and what each may import": OpenSSL is reached through `TLS` and `RelayCrypto` only.
    /// The tests' helper modules under Tests/Support count too.
    @Test func onlyTLSAndRelayCryptoImportOpenSSL() throws {
        let byModule = try Self.filesByModule()
        #expect(byModule.values.joined().count > 50, "Sources/ was not read")
        #expect(byModule["RelayTestSupport"] != nil, "Tests/Support was not read")
        let importers = try byModule.filter { try Self.imports(of: $0.value).contains("COpenSSL") }.keys
        #expect(Set(importers) == ["TLS", "RelayCrypto"], "modules importing COpenSSL: \(importers.sorted())")
    }

    /// The layers' rule (docs/DESIGN.md, "Modules and what each may import"): the base, the protocols and the
    /// relay's core are pure: no C library, no event loop, no network module.
    @Test func pureLayersImportNoCAndNoLoop() throws {
        let byModule = try Self.filesByModule()
        let network = try Self.folders(in: "Sources/Network")
        let c = try Self.folders(in: "Sources/C")
        let pure = try Self.folders(in: "Sources/Base") + Self.folders(in: "Sources/Protocols") + ["RelayCore"]
        #expect(pure.contains("HTTP1") && pure.contains("ErrorCodes"), "the pure layers were not read")
        for module in pure {
            let imported = try Self.imports(of: byModule[module] ?? [])
            let forbidden = imported.intersection(network + c)
            #expect(forbidden.isEmpty, "\(module) imports \(forbidden.sorted())")
        }
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
