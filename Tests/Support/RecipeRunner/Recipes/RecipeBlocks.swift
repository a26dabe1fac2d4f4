import ErrorCodes

/// The documents' command blocks and the marks that say which run runs each: every ```sh block of README.md,
/// OPERATIONS.md and the operations pages (docs/operations/) is marked, on its last non-empty line above, `<!-- run: NAME (scripts/doc-test) -->` (a
/// scenario of `duo-relay-recipes doc-test`) or `<!-- run: NAME (scripts/container-test ...) -->`; a block that
/// only illustrates starts with the line `# Illustration`. Pure: documents in, blocks or the problems out.
struct RecipeBlock: Equatable, Sendable {
    /// The scenario the mark names.
    var scenario: String
    /// The block's number within its scenario, from 1, in document order (RecipeExtract.documents).
    var number: Int
    /// The block's lines, each ended by a newline.
    var body: String
    /// `DOCUMENT:LINE`, the line of the opening fence.
    var location: String

    /// `NAME.N`, as the block's file is named (NAME.N.sh).
    var name: String { "\(scenario).\(number)" }
}

/// The scenarios the marks may name.
enum RecipeScenarios {
    /// Run on this machine by `duo-relay-recipes doc-test`, in this order.
    static let local = [
        "quick-start", "secrets-env", "systemd", "redis-pair", "redis-sentinel", "egress-proxy", "hardware-keys",
        "restarts", "tls-certbot",
    ]
    /// Run by scripts/container-test.
    static let container = ["container", "kubernetes"]
}

enum RecipeErrorDomain {}
/// A document's blocks that no run runs, or a mark naming no scenario.
typealias RecipeError = ModuleError<RecipeErrorDomain>
extension ErrorCode where Domain == RecipeErrorDomain {
    /// Blocks with no mark and no `# Illustration` line.
    static var unmarked: Self { Self("unmarked") }
    /// A document that cannot be read.
    static var unreadable: Self { Self("unreadable") }
    /// A mark naming a scenario that no run has.
    static var unknownScenario: Self { Self("unknownScenario") }
}

enum RecipeBlocks {
    /// `pages` in the order `index` first links each (a Markdown link to the page's path), then those it never
    /// links, by name.
    static func linkOrder(of pages: [String], in index: String) -> [String] {
        func firstLink(_ page: String) -> String.Index? { index.range(of: "](" + page + ")")?.lowerBound }
        let linked = pages.compactMap { page in firstLink(page).map { (page, $0) } }.sorted { $0.1 < $1.1 }.map(\.0)
        return linked + pages.filter { !linked.contains($0) }.sorted()
    }

    /// One document's blocks in order: each marked one with its scenario, and the lines of the unmarked ones.
    struct Reading: Equatable {
        var marked: [(scenario: String, body: String, line: Int)]
        var unmarked: [Int]

        static func == (lhs: Reading, rhs: Reading) -> Bool {
            lhs.unmarked == rhs.unmarked && lhs.marked.map(\.scenario) == rhs.marked.map(\.scenario)
                && lhs.marked.map(\.body) == rhs.marked.map(\.body) && lhs.marked.map(\.line) == rhs.marked.map(\.line)
        }
    }

    /// The scenario a mark line names, or nil if the line is no mark of scripts/doc-test or scripts/container-test.
    static func scenario(markedBy line: String) -> String? {
        let prefix = "<!-- run: "
        guard line.hasPrefix(prefix) else { return nil }
        let rest = line.dropFirst(prefix.count)
        let name = rest.prefix { ("a"..."z").contains($0) || $0 == "-" }
        guard !name.isEmpty else { return nil }
        let after = rest.dropFirst(name.count)
        guard after.hasPrefix(" (scripts/doc-test") || after.hasPrefix(" (scripts/container-test") else { return nil }
        return String(name)
    }

    /// Reads one document: a block opens at a line that is exactly ```sh and closes at the next line that is
    /// exactly ```; its mark is the last non-empty line outside every block above its opening fence.
    static func read(_ text: String) -> Reading {
        var reading = Reading(marked: [], unmarked: [])
        var previous = ""
        var open: (line: Int, scenario: String?)?
        var body = ""
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(line)
            if let block = open {
                if line == "```" {
                    if let scenario = block.scenario {
                        reading.marked.append((scenario, body, block.line))
                    } else if !body.hasPrefix("# Illustration") {
                        reading.unmarked.append(block.line)
                    }
                    open = nil
                } else {
                    body += line + "\n"
                }
            } else if line == "```sh" {
                open = (index + 1, scenario(markedBy: previous))
                body = ""
            } else if !line.isEmpty {
                previous = line
            }
        }
        return reading
    }

    /// Every marked block of the documents (name and text, in order), numbered per scenario; throws if a block has
    /// no mark (the problem names each such block's line) or a mark names a scenario no run has.
    static func blocks(
        of documents: [(name: String, text: String)],
        scenarios: [String] = RecipeScenarios.local + RecipeScenarios.container
    ) throws(RecipeError) -> [RecipeBlock] {
        var blocks: [RecipeBlock] = []
        var counts: [String: Int] = [:]
        var unmarked: [String] = []
        for document in documents {
            let reading = read(document.text)
            unmarked += reading.unmarked.map {
                "\(document.name) line \($0): a command block that no test runs: mark it "
                    + "<!-- run: NAME (scripts/doc-test) --> or start it with \"# Illustration\""
            }
            for block in reading.marked {
                counts[block.scenario, default: 0] += 1
                blocks.append(
                    RecipeBlock(
                        scenario: block.scenario, number: counts[block.scenario]!, body: block.body,
                        location: "\(document.name):\(block.line)"))
            }
        }
        guard unmarked.isEmpty else {
            throw RecipeError(.unmarked, unmarked.joined(separator: "\n"))
        }
        for name in Set(blocks.map(\.scenario)).sorted() where !scenarios.contains(name) {
            let first = blocks.first { $0.scenario == name }!
            throw RecipeError(
                .unknownScenario, "a block is marked for '\(name)', which no test runs (\(first.location))")
        }
        return blocks
    }

    /// The first local scenario's block that `ran` does not hold (by `NAME.N`), if any.
    static func firstNotRun(_ blocks: [RecipeBlock], ran: Set<String>, scenarios: [String] = RecipeScenarios.local)
        -> RecipeBlock?
    {
        blocks.first { scenarios.contains($0.scenario) && !ran.contains($0.name) }
    }
}
