import Foundation
import Testing

/// The rule every I/O component follows (docs/DESIGN.md, "Machines and their shells"): a thin shell around a pure machine.
/// A machine makes no C call; the Redis pipeline's shell decides less than half as much as its machine.
@Suite("Machines are pure and shells are thin")
struct MachineShellTests {
    /// Branches in Swift source with its comments and string literals stripped: `if`, `guard`, `case`, `switch`, the
    /// ternary `?:`, `&&` and `||`.
    static func branches(in source: String) -> Int {
        let code = code(of: source)
        let words = code.split { !($0.isLetter || $0.isNumber || $0 == "_") }
        let keywords = words.filter { ["if", "guard", "case", "switch"].contains($0) }.count
        let operators = code.components(separatedBy: "&&").count + code.components(separatedBy: "||").count - 2
        let ternaries = code.components(separatedBy: " ? ").count - 1
        return keywords + operators + ternaries
    }

    /// Swift source without its comments, and each string literal as `""`.
    static func code(of source: String) -> String {
        var code = ""
        var index = source.startIndex
        func next(_ offset: Int = 1) -> Character? {
            source.index(index, offsetBy: offset, limitedBy: source.endIndex).flatMap {
                $0 < source.endIndex ? source[$0] : nil
            }
        }
        while index < source.endIndex {
            let character = source[index]
            if character == "/", next() == "/" {
                while index < source.endIndex, source[index] != "\n" { index = source.index(after: index) }
            } else if character == "/", next() == "*" {
                index = source.index(index, offsetBy: 2)
                while index < source.endIndex, !(source[index] == "*" && next() == "/") {
                    index = source.index(after: index)
                }
                index = source.index(index, offsetBy: 2, limitedBy: source.endIndex) ?? source.endIndex
            } else if character == "\"" {
                // A string (also a multi-line one): skipped whole, its escapes with it.
                let triple = next() == "\"" && next(2) == "\""
                index = source.index(index, offsetBy: triple ? 3 : 1)
                while index < source.endIndex {
                    if source[index] == "\\" {
                        index = source.index(index, offsetBy: 2, limitedBy: source.endIndex) ?? source.endIndex
                        continue
                    }
                    if source[index] == "\"", !triple || (next() == "\"" && next(2) == "\"") {
                        index = source.index(index, offsetBy: triple ? 3 : 1)
                        break
                    }
                    index = source.index(after: index)
                }
                code += "\"\""
            } else {
                code.append(character)
                index = source.index(after: index)
            }
        }
        return code
    }

    @Test func theCounterCountsBranchesAndNotCommentsOrStrings() {
        let source = """
            // if guard case switch && || ? :
            /* if if */ let x = a && b ? "if && ||" : c || d
            if x { switch y { case 1: break; default: guard z else { return } } }
            let s = \"""
                if guard
                \"""
            """
        #expect(Self.branches(in: source) == 7)
    }

    @Test func redisPipelineDecidesLessThanHalfAsMuchAsItsMachine() throws {
        let folder = "Sources/Network/RedisClient/"
        let shell = try ["RedisPipeline.swift", "SentinelLocator.swift"].map {
            Self.branches(in: try Repository.text(folder + $0))
        }
        let machine = Self.branches(in: try Repository.text(folder + "RedisPipelineMachine.swift"))
        let sentinel = Self.branches(in: try Repository.text(folder + "SentinelMachine.swift"))
        let figures =
            "shell: RedisPipeline \(shell[0]), SentinelLocator \(shell[1]); machines: RedisPipelineMachine "
            + "\(machine), SentinelMachine \(sentinel)"
        #expect(machine > 50, "the machine was read: \(figures)")
        #expect(shell[0] * 2 < machine, "\(figures)")
        #expect(shell.reduce(0, +) * 2 < machine, "\(figures)")
    }

    /// Every machine (a `*Machine.swift` file under Sources) imports no C module and calls no C function, neither
    /// directly nor through the Swift wrappers that do.
    @Test func noMachineMakesACCall() throws {
        let machines = Repository.allFiles(under: "Sources").filter { $0.hasSuffix("Machine.swift") }
        #expect(machines.count >= 5, "the machines were found: \(machines)")
        let cModules = try FileManager.default.contentsOfDirectory(atPath: Repository.url("Sources/C").path)
        #expect(cModules.contains("CNGHTTP2") && cModules.contains("CHiredis"))
        let calls = [
            "nghttp2_", "redisFormat", "redisReader", "redisFree", "uv_", "SSL_", "EVP_", "OPENSSL_", "mallctl",
            "HTTP2Session.", "RedisCommand.append", "strerror",
        ]
        for path in machines {
            let text = Self.code(of: try Repository.text(path))
            for module in cModules {
                #expect(!text.contains("import \(module)\n"), "\(path) imports \(module)")
            }
            for call in calls { #expect(!text.contains(call), "\(path) calls \(call)") }
        }
    }
}
