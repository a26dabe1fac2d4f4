import Foundation

/// `extract DIR [DOCUMENT...]`: checks the marks of the documents (by default README.md, OPERATIONS.md and every
/// page of docs/operations/) and
/// writes each block to DIR/NAME.N.sh and its `DOCUMENT:LINE` as line N of DIR/NAME.where: what
/// scripts/container-test runs, through `scripts/doc-test --extract DIR`.
enum RecipeExtract {
    /// The documents whose blocks are run, in this order: README.md, OPERATIONS.md (the operations index), the
    /// pages of docs/operations/ in the order the index links them, then any page it does not link, by name. A
    /// scenario's blocks are numbered across documents in this order.
    static func documents(in directory: String? = nil) -> [String] {
        let base = directory.map { $0 + "/" } ?? ""
        let front = ["README.md", "OPERATIONS.md"].filter { FileManager.default.fileExists(atPath: base + $0) }
        let pages = ((try? FileManager.default.contentsOfDirectory(atPath: base + "docs/operations")) ?? [])
            .filter { $0.hasSuffix(".md") }.map { "docs/operations/" + $0 }
        let index = (try? String(contentsOfFile: base + "OPERATIONS.md", encoding: .utf8)) ?? ""
        return front + RecipeBlocks.linkOrder(of: pages, in: index)
    }

    static func run(_ arguments: [String]) -> Int32 {
        guard let directory = arguments.first else {
            printError("usage: duo-relay-recipes extract DIR [DOCUMENT...]")
            return 2
        }
        let documents = arguments.count > 1 ? Array(arguments.dropFirst()) : Self.documents()
        do {
            let blocks = try blocks(of: documents)
            try write(blocks, to: directory)
            return 0
        } catch let error as RecipeError {
            failExtract(error)
            return 1
        } catch {
            printError("doc-test: FAIL: \(error)")
            return 1
        }
    }

    /// The documents' blocks, read from their files (in `directory`, or the current one), named as given.
    static func blocks(of documents: [String], in directory: String? = nil) throws(RecipeError) -> [RecipeBlock] {
        let texts = try documents.map { document throws(RecipeError) in
            let path = directory.map { $0 + "/" + document } ?? document
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw RecipeError(.unreadable, "cannot read \(document)")
            }
            return (name: document, text: text)
        }
        return try RecipeBlocks.blocks(of: texts)
    }

    /// Writes each block to DIRECTORY/NAME.N.sh and appends its location to DIRECTORY/NAME.where.
    static func write(_ blocks: [RecipeBlock], to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var locations: [String: String] = [:]
        for block in blocks {
            try block.body.write(toFile: "\(directory)/\(block.name).sh", atomically: false, encoding: .utf8)
            locations[block.scenario, default: ""] += block.location + "\n"
        }
        for (scenario, text) in locations {
            try text.write(toFile: "\(directory)/\(scenario).where", atomically: false, encoding: .utf8)
        }
    }

    /// The failure's lines: each unmarked block on a line of its own, then the one FAIL line.
    static func failExtract(_ error: RecipeError) {
        if error.code == .unmarked {
            printError(error.reason)
            printError("doc-test: FAIL: command blocks that no test runs (above)")
        } else {
            printError("doc-test: FAIL: \(error.reason)")
        }
    }
}
