import Foundation
import Testing

/// Every document a file of the repository names (`docs/DESIGN.md`, `OPERATIONS.md`, ...) exists in the repository,
/// and every section it names in one (`docs/DESIGN.md, "The HTTP front"`) is a heading of that document: a document
/// renamed, moved or removed, or a section retitled, without its references fails here.
@Suite("Every document and section the repository names exists in it")
struct DocumentReferenceTests {
    @Test func everyReferenceInTheRepositoryResolves() throws {
        var checked = 0
        var broken: [DocumentReferences.Broken] = []
        for path in DocumentReferences.scannedFiles() {
            guard let text = DocumentReferences.text(path) else { continue }
            let found = DocumentReferences.check(text, in: path, reading: DocumentReferences.text)
            checked += found.checked
            broken += found.broken
        }
        #expect(checked > 100, "too few references found: the scan did not read the repository")
        let list = broken.map(\.description).joined(separator: "\n")
        #expect(broken.isEmpty, "\(broken.count) broken references:\n\(list)")
    }

    /// The check itself, on made-up files: a missing document, a missing section and a section split over comment
    /// lines are each caught; existing ones pass. (The names are assembled so that this file holds no broken one.)
    @Test func aBrokenReferenceIsReported() {
        let design = "docs/DESIGN" + ".md"
        let documents = [
            design: "# Design\n\n## The HTTP front\n\ntext\n\n### Several `X` lines\n",
            "README" + ".md": "# duo\n\n## Layout\n",
        ]
        let read = { (path: String) in documents[path] }
        func broken(_ text: String, in file: String = "Sources/HTTP1/Parser.swift") -> [String] {
            DocumentReferences.check(text, in: file, reading: read).broken.map(\.reference)
        }
        #expect(broken("/// (\(design), \"The HTTP front\")").isEmpty)
        #expect(broken("/// (\(design), \"The\n/// HTTP front\")").isEmpty)
        #expect(broken("see \(design)'s \"Several X lines\" and [the readme](../README" + ".md)", in: design).isEmpty)
        #expect(broken("/// (DESIGN" + ".md, \"The HTTP front\")") == ["DESIGN" + ".md"])
        #expect(broken("/// (\(design), \"The HTTP Front\")") == [design + ", \"The HTTP Front\""])
        #expect(broken("/// (\(design), \"The HTTP front\" and \"Limits\")") == [design + ", \"Limits\""])
        #expect(broken("# see docs/LOOP" + ".md") == ["docs/LOOP" + ".md"])
        #expect(broken("https://example.com/docs/LOOP" + ".md, README" + ".md, \"Layout\"").isEmpty)
    }
}

/// Finds the references to documents in a file's text and checks them against the repository.
enum DocumentReferences {
    struct Broken: CustomStringConvertible {
        var file: String
        var line: Int
        var reference: String
        var problem: String
        var description: String { "\(file):\(line): \(reference): \(problem)" }
    }

    /// The folders and top-level files scanned: everything the project keeps but build products.
    static let roots = ["Sources", "Tests", "Fuzz", "scripts", "docs", "deploy", ".ci"]
    static let skippedFolders: Set<String> = [".build", ".swiftpm", "fuzz-artifacts"]

    static func scannedFiles() -> [String] {
        var paths: [String] = []
        let top = (try? FileManager.default.contentsOfDirectory(atPath: Repository.root.path)) ?? []
        for name in top.sorted() where name.hasSuffix(".md") || name == "Package.swift" { paths.append(name) }
        for root in roots {
            paths += Repository.allFiles(under: root).filter { path in
                !path.split(separator: "/").contains { skippedFolders.contains(String($0)) }
            }
        }
        return paths
    }

    /// A file's text, or nil when it is absent or not UTF-8 text.
    static func text(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: Repository.url(path).path), !data.contains(0) else {
            return nil
        }
        return String(data: data, encoding: .utf8)
    }

    /// A document name: a path ending in `.md` (one preceded by a letter, `/`, `.` or `:` is part of a longer name
    /// or of a URL, and is left alone).
    static var documentPattern: Regex<(Substring, Substring)> {
        #/((?:\.\.?/)*[A-Za-z0-9_][A-Za-z0-9_./-]*\.md)(?![A-Za-z0-9_])/#
    }
    /// The first section named right after a document: `, "A"`, `'s "A"` or ` "A"`.
    static var firstSectionPattern: Regex<(Substring, Substring)> {
        #/(?:,[ \t]*|'s[ \t]+|[ \t]+)(?:\n[ \t]*(?:\/\/\/|\/\/|#)?[ \t]*)?"([^"]{1,100})"/#
    }
    /// A further section: `, "B"` or ` and "B"`.
    static var nextSectionPattern: Regex<(Substring, Substring)> {
        #/(?:,[ \t]*|[ \t]+and[ \t]+)(?:\n[ \t]*(?:\/\/\/|\/\/|#)?[ \t]*)?"([^"]{1,100})"/#
    }
    static let partOfALongerName: Set<Character> = ["/", ".", ":", "-", "_"]

    /// The references in `text` (the file at `path`) and those that do not resolve. `reading` gives a document's
    /// text by its path from the repository's root, nil when there is none.
    static func check(
        _ text: String, in path: String, reading: (String) -> String?
    ) -> (checked: Int, broken: [Broken]) {
        var checked = 0
        var broken: [Broken] = []
        for match in text.matches(of: documentPattern) {
            if match.range.lowerBound > text.startIndex {
                let before = text[text.index(before: match.range.lowerBound)]
                if before.isLetter || before.isNumber || partOfALongerName.contains(before) { continue }
            }
            let name = String(match.output.1)
            let line = text[..<match.range.lowerBound].count { $0 == "\n" } + 1
            checked += 1
            guard let (document, contents) = resolve(name, from: path, reading: reading) else {
                broken.append(Broken(file: path, line: line, reference: name, problem: "no such document"))
                continue
            }
            let headings = Self.headings(of: contents)
            var rest = text[match.range.upperBound...]
            var pattern = firstSectionPattern
            while let section = rest.prefixMatch(of: pattern) {
                let title = normalized(String(section.output.1))
                checked += 1
                if !headings.contains(title) && !headings.contains(title.replacing("`", with: "")) {
                    broken.append(
                        Broken(
                            file: path, line: line, reference: "\(name), \"\(title)\"",
                            problem: "\(document) has no heading \"\(title)\""))
                }
                rest = rest[section.range.upperBound...]
                pattern = nextSectionPattern
            }
        }
        return (checked, broken)
    }

    /// The document a name means: relative to the naming file's folder, or to the repository's root.
    private static func resolve(
        _ name: String, from path: String, reading: (String) -> String?
    ) -> (String, String)? {
        let folder = path.split(separator: "/").dropLast().joined(separator: "/")
        var candidates = [normalizedPath(folder.isEmpty ? name : folder + "/" + name)]
        if !name.hasPrefix(".") { candidates.append(normalizedPath(name)) }
        for candidate in candidates.compactMap({ $0 }) {
            if let contents = reading(candidate) { return (candidate, contents) }
        }
        return nil
    }

    /// `a/b/../c.md` as `a/c.md`; nil when it leaves the repository.
    private static func normalizedPath(_ path: String) -> String? {
        var parts: [Substring] = []
        for part in path.split(separator: "/") {
            if part == "." { continue }
            if part == ".." {
                guard !parts.isEmpty else { return nil }
                parts.removeLast()
            } else {
                parts.append(part)
            }
        }
        return parts.joined(separator: "/")
    }

    /// A title as written, with a line break of a comment (and its `///`, `//` or `#`) read as one space.
    private static func normalized(_ title: String) -> String {
        title.replacing(#/[ \t]*\n[ \t]*(?:\/\/\/|\/\/|#)?[ \t]*/#, with: " ")
    }

    /// A Markdown document's headings (outside code blocks), as written and without backticks.
    static func headings(of text: String) -> Set<String> {
        var headings: Set<String> = []
        var inCode = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            guard !inCode, let heading = line.firstMatch(of: #/^#{1,6}[ \t]+(.+?)[ \t]*$/#) else { continue }
            let title = String(heading.output.1)
            headings.insert(title)
            headings.insert(title.replacing("`", with: ""))
        }
        return headings
    }
}
