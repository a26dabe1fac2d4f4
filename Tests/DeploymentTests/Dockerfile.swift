import Foundation

/// A Dockerfile split into build stages and instructions, continuation lines joined and comments dropped.
struct Dockerfile {
    struct Instruction {
        /// Upper-case keyword: `FROM`, `RUN`, `COPY`, ...
        let keyword: String
        let arguments: String
    }

    struct Stage {
        /// The image named by `FROM`.
        let base: String
        /// The `AS` name, if any.
        let name: String?
        var instructions: [Instruction]

        func all(_ keyword: String) -> [Instruction] { instructions.filter { $0.keyword == keyword } }

        /// The Debian packages that this stage's `apt-get install` commands name.
        var aptPackages: Set<String> {
            var packages: Set<String> = []
            for run in all("RUN") {
                for command in run.arguments.components(separatedBy: "&&") {
                    let words = command.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
                    guard let apt = words.firstIndex(of: "apt-get"), words.dropFirst(apt + 1).contains("install")
                    else { continue }
                    let install = words.firstIndex(of: "install")!
                    packages.formUnion(words[(install + 1)...].filter { !$0.hasPrefix("-") })
                }
            }
            return packages
        }
    }

    private(set) var stages: [Stage] = []
    /// The build arguments declared before the first `FROM` (`ARG NAME=default`), with their defaults.
    private(set) var globalArguments: [String: String] = [:]

    init(_ text: String) {
        var logicalLines: [String] = []
        var pending = ""
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = String(rawLine)
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("#") { continue }
            if trimmed.hasSuffix("\\") {
                pending += String(trimmed.dropLast()) + " "
                continue
            }
            pending += trimmed
            if !pending.trimmingCharacters(in: .whitespaces).isEmpty { logicalLines.append(pending) }
            pending = ""
        }
        for line in logicalLines {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            let instruction = Instruction(
                keyword: parts[0].uppercased(),
                arguments: parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : "")
            if instruction.keyword == "FROM" {
                let words = instruction.arguments.split(separator: " ").map(String.init)
                let name = words.count >= 3 && words[1].uppercased() == "AS" ? words[2] : nil
                stages.append(Stage(base: expanded(words.first ?? ""), name: name, instructions: []))
            } else if instruction.keyword == "ARG" && stages.isEmpty {
                let parts = instruction.arguments.split(separator: "=", maxSplits: 1).map(String.init)
                globalArguments[parts[0]] = parts.count > 1 ? parts[1] : ""
            } else if !stages.isEmpty {
                stages[stages.count - 1].instructions.append(instruction)
            }
        }
    }

    /// `text` with each `${NAME}` of a global build argument replaced by its default, as a builder
    /// given no `--build-arg` does.
    private func expanded(_ text: String) -> String {
        var result = text
        for (name, value) in globalArguments { result = result.replacingOccurrences(of: "${\(name)}", with: value) }
        return result
    }
}
