import Foundation
import Testing

/// docs/DESIGN.md's table of machines against the code: every pure machine the sources declare (a type whose name
/// ends in `Machine`) has its row, and every machine the table names is declared.
@Suite("docs/DESIGN.md names every state machine, and only machines that exist")
struct DesignDocumentTests {
    /// The names of the types declared in Sources/ whose names end in `Machine`.
    static func declaredMachines() throws -> Set<String> {
        let pattern = try Regex(
            #"(?m)^\s*(?:public |package )?(?:struct|enum|final class|class) ([A-Za-z0-9]+Machine)\b"#)
        var names: Set<String> = []
        for path in Repository.allFiles(under: "Sources") where path.hasSuffix(".swift") {
            let text = try Repository.text(path)
            for match in text.matches(of: pattern) {
                if let name = match.output[1].substring { names.insert(String(name)) }
            }
        }
        return names
    }

    /// The first column of the section's table: each backticked name in it.
    static func tabledMachines() throws -> Set<String> {
        let section = Documentation.section("Machines and their shells", of: try Repository.text("docs/DESIGN.md"))
        var names: Set<String> = []
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            let firstColumn = line.dropFirst(2).prefix { $0 != "|" }
            let pieces = firstColumn.split(separator: "`", omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() where index % 2 == 1 && !piece.contains("/") {
                names.insert(String(piece))
            }
        }
        return names
    }

    @Test func everyMachineHasItsRow() throws {
        let declared = try Self.declaredMachines()
        #expect(declared.contains("PoolStateMachine"), "Sources/ was not read: \(declared)")
        let tabled = try Self.tabledMachines()
        #expect(tabled.contains("HTTP1Connection"), "the table was not read: \(tabled)")
        let missing = declared.subtracting(tabled)
        #expect(missing.isEmpty, "docs/DESIGN.md's machines table lacks \(missing.sorted())")
    }

    @Test func everyTabledMachineExists() throws {
        let sources = Repository.allFiles(under: "Sources").filter { $0.hasSuffix(".swift") }
        let text = try sources.map { try Repository.text($0) }.joined(separator: "\n")
        for name in try Self.tabledMachines() {
            let declared = try Regex(#"(?:struct|enum|class) "# + name + #"\b"#)
            #expect(text.contains(declared), "docs/DESIGN.md names \(name), which Sources/ does not declare")
        }
    }
}
