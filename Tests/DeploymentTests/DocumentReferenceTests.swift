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
        #expect(
            broken.isEmpty, "\(broken.count) broken references:\n\(broken.map(\.description).joined(separator: "\n"))")
    }

    /// The check itself, on made-up files: a missing document, a missing section and a section split over comment
    /// lines are each caught; existing ones pass. (The names are assembled so that this file holds no broken one.)
    @Test func aBrokenReferenceIsReported() {
        let design = "docs/DESIGN" + ".md"
        let documents = [
            design: "# Design\n\n## The HTTP front\n\ntext\n\n### Several `X` lines\n\n## POST /v1/grant (the phone)\n",
            "README" + ".md": "# duo\n\n## Layout\n",
        ]
        let read = { (path: String) in documents[path] }
        func broken(_ text: String, in file: String = "Sources/Protocols/HTTP1/Parser.swift") -> [String] {
            DocumentReferences.check(text, in: file, reading: read).broken.map(\.reference)
        }
        #expect(broken("/// (\(design), \"The HTTP front\")").isEmpty)
        #expect(broken("/// (\(design), \"The\n/// HTTP front\")").isEmpty)
        #expect(broken("see \(design)'s \"Several X lines\" and [the readme](../README" + ".md)", in: design).isEmpty)
        #expect(broken("/// (DESIGN" + ".md, \"The HTTP front\")") == ["DESIGN" + ".md"])
        #expect(broken("/// (\(design), \"The HTTP Front\")") == [design + ", \"The HTTP Front\""])
        #expect(broken("/// (\(design), \"The HTTP front\" and \"Limits\")") == [design + ", \"Limits\""])
        #expect(broken("# see docs/LOOP" + ".md") == ["docs/LOOP" + ".md"])
        #expect(broken("(\(design), \"POST /v1/grant\")").isEmpty)
        #expect(broken("(\(design), \"The HTTP\")") == [design + ", \"The HTTP\""])
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

    /// The first section named right after a document: `, "A"`, `'s "A"` or ` "A"`.
    static var firstSectionPattern: Regex<(Substring, Substring)> {
        #/(?:,[ \t]*|'s[ \t]+|[ \t]+)(?:\n[ \t]*(?:\/\/\/|\/\/|#)?[ \t]*)?"([^"]{1,100})"/#
    }
    /// A further section: `, "B"` or ` and "B"`.
    static var nextSectionPattern: Regex<(Substring, Substring)> {
        #/(?:,[ \t]*|[ \t]+and[ \t]+)(?:\n[ \t]*(?:\/\/\/|\/\/|#)?[ \t]*)?"([^"]{1,100})"/#
    }
    /// The characters of a document's path.
    static func isPathCharacter(_ character: Character) -> Bool {
        character.isASCII && (character.isLetter || character.isNumber || "_./-".contains(character))
    }

    /// The document names in `text`: paths ending in `.md`, each with the range it takes. A name preceded by a
    /// letter or `:` is part of a longer word or of a URL, and is left alone. (Found without `Regex`, which takes
    /// seconds over the repository.)
    static func documentNames(in text: String) -> [(name: String, range: Range<String.Index>)] {
        var names: [(String, Range<String.Index>)] = []
        var searchFrom = text.startIndex
        while let suffix = text.range(of: ".md", range: searchFrom..<text.endIndex) {
            searchFrom = suffix.upperBound
            if suffix.upperBound < text.endIndex {
                let after = text[suffix.upperBound]
                if after.isLetter || after.isNumber || after == "_" { continue }
            }
            var start = suffix.lowerBound
            while start > text.startIndex, isPathCharacter(text[text.index(before: start)]) {
                start = text.index(before: start)
            }
            if start > text.startIndex {
                let before = text[text.index(before: start)]
                if before.isLetter || before.isNumber || before == ":" { continue }
            }
            let name = text[start..<suffix.upperBound]
            let stem = name.drop { $0 == "." || $0 == "/" }
            guard name.first != "/", stem.count > 3, stem.first!.isLetter || stem.first!.isNumber || stem.first == "_"
            else { continue }
            names.append((String(name), start..<suffix.upperBound))
        }
        return names
    }

    /// The references in `text` (the file at `path`) and those that do not resolve. `reading` gives a document's
    /// text by its path from the repository's root, nil when there is none.
    static func check(
        _ text: String, in path: String, reading: (String) -> String?
    ) -> (checked: Int, broken: [Broken]) {
        var checked = 0
        var broken: [Broken] = []
        guard text.contains(".md") else { return (0, []) }
        var line = 1
        var counted = text.startIndex
        for (name, range) in documentNames(in: text) {
            line += text[counted..<range.lowerBound].count { $0 == "\n" }
            counted = range.lowerBound
            checked += 1
            guard let (document, contents) = resolve(name, from: path, reading: reading) else {
                broken.append(Broken(file: path, line: line, reference: name, problem: "no such document"))
                continue
            }
            let headings = Self.headings(of: contents)
            var rest = text[range.upperBound...]
            var pattern = firstSectionPattern
            while let section = rest.prefixMatch(of: pattern) {
                let title = normalized(String(section.output.1))
                checked += 1
                if !Self.names(title, among: headings) {
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

    /// A path with its `.` and `..` parts resolved; nil when it leaves the repository.
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

    /// Whether a section title names one of the headings: the heading itself, or the heading without its qualifier
    /// in parentheses (`"POST /v1/grant"` names `## POST /v1/grant (the phone)`), backticks or not.
    static func names(_ title: String, among headings: Set<String>) -> Bool {
        let plain = title.replacing("`", with: "")
        return headings.contains { heading in
            heading == title || heading == plain || heading.hasPrefix(title + " (") || heading.hasPrefix(plain + " (")
        }
    }

    /// A Markdown document's headings (outside code blocks), as written and without backticks.
    static func headings(of text: String) -> Set<String> {
        var headings: Set<String> = []
        var inCode = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inCode.toggle() }
            guard !inCode, line.hasPrefix("#") else { continue }
            let marks = line.prefix { $0 == "#" }
            let rest = line.dropFirst(marks.count)
            guard marks.count <= 6, rest.first == " " || rest.first == "\t" else { continue }
            let title = rest.trimmingCharacters(in: .whitespaces)
            headings.insert(title)
            headings.insert(title.replacing("`", with: ""))
        }
        return headings
    }
}
