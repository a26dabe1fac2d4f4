import Foundation
import Testing

@testable import RecipeRunner

@Suite struct RecipeBlocksTests {
    static let document = """
        # Title

        <!-- run: quick-start (scripts/doc-test) -->
        ```sh
        echo one
        echo two
        ```

        Some text.
        <!-- run: systemd (scripts/doc-test; OPERATIONS.md) -->

        ```sh
        echo three
        ```

        An illustration, not run:
        ```sh
        # Illustration: not run
        rm -rf /
        ```

        ```json
        {"not": "a shell block"}
        ```
        <!-- run: container (scripts/container-test container) -->
        ```sh
        podman build .
        ```
        """

    @Test func aMarkNamesTheScenarioOfTheBlockBelowIt() {
        #expect(RecipeBlocks.scenario(markedBy: "<!-- run: redis-pair (scripts/doc-test) -->") == "redis-pair")
        #expect(
            RecipeBlocks.scenario(markedBy: "<!-- run: kubernetes (scripts/container-test kubernetes) -->")
                == "kubernetes")
        #expect(RecipeBlocks.scenario(markedBy: "<!-- run: Quick (scripts/doc-test) -->") == nil)
        #expect(RecipeBlocks.scenario(markedBy: "<!-- run: quick-start (scripts/bench) -->") == nil)
        #expect(RecipeBlocks.scenario(markedBy: "run: quick-start (scripts/doc-test)") == nil)
    }

    @Test func readsEveryShellBlockWithItsMarkAndLine() {
        let reading = RecipeBlocks.read(Self.document)
        #expect(reading.unmarked.isEmpty)
        #expect(reading.marked.map(\.scenario) == ["quick-start", "systemd", "container"])
        #expect(reading.marked.map(\.line) == [4, 12, 26])
        #expect(reading.marked.map(\.body) == ["echo one\necho two\n", "echo three\n", "podman build .\n"])
    }

    @Test func numbersTheBlocksPerScenarioAcrossTheDocumentsInOrder() throws {
        let second = "<!-- run: systemd (scripts/doc-test) -->\n```sh\nsystemctl status duo-relay\n```\n"
        let blocks = try RecipeBlocks.blocks(of: [("README.md", Self.document), ("OPERATIONS.md", second)])
        #expect(blocks.map(\.name) == ["quick-start.1", "systemd.1", "container.1", "systemd.2"])
        #expect(blocks.map(\.location) == ["README.md:4", "README.md:12", "README.md:26", "OPERATIONS.md:2"])
    }

    @Test func aBlockWithoutAMarkFailsNamingItsLine() {
        let text =
            "Text.\n\n```sh\necho unmarked\n```\n\n<!-- run: quick-start (scripts/doc-test) -->\n```sh\nls\n```\n"
        #expect(RecipeBlocks.read(text).unmarked == [3])
        #expect(throws: RecipeError(.unmarked, "")) { try RecipeBlocks.blocks(of: [("README.md", text)]) }
        do {
            _ = try RecipeBlocks.blocks(of: [("README.md", text)])
        } catch {
            #expect(error.reason.hasPrefix("README.md line 3: a command block that no test runs"))
        }
    }

    @Test func aMarkAboveAnEarlierBlockDoesNotMarkTheNextOne() {
        // The mark is the last non-empty line outside blocks: a closed block leaves the mark above it in place,
        // so a second block right below the first shares it, but any text in between ends it.
        let text = "<!-- run: quick-start (scripts/doc-test) -->\n```sh\nls\n```\nText.\n```sh\npwd\n```\n"
        #expect(RecipeBlocks.read(text).unmarked == [6])
        let below = "<!-- run: quick-start (scripts/doc-test) -->\n```sh\nls\n```\n\n```sh\npwd\n```\n"
        #expect(RecipeBlocks.read(below).marked.map(\.line) == [2, 6])
        #expect(RecipeBlocks.read(below).marked.map(\.scenario) == ["quick-start", "quick-start"])
    }

    @Test func aMarkForNoScenarioFails() {
        let text = "<!-- run: nowhere (scripts/doc-test) -->\n```sh\nls\n```\n"
        do {
            _ = try RecipeBlocks.blocks(of: [("OPERATIONS.md", text)])
            Issue.record("a mark for an unknown scenario passed")
        } catch {
            #expect(error.code == .unknownScenario)
            #expect(error.reason == "a block is marked for 'nowhere', which no test runs (OPERATIONS.md:2)")
        }
    }

    @Test func theFirstLocalBlockNotRunIsNamed() throws {
        let blocks = try RecipeBlocks.blocks(of: [("README.md", Self.document)])
        #expect(RecipeBlocks.firstNotRun(blocks, ran: ["quick-start.1"])?.name == "systemd.1")
        #expect(RecipeBlocks.firstNotRun(blocks, ran: ["quick-start.1", "systemd.1"]) == nil)
    }

    /// The repository's own documents: every block marked, every mark known, every local scenario with blocks.
    @Test func theDocumentsBlocksAreAllMarkedForKnownScenarios() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let documents = try RecipeExtract.documents(in: root).map {
            (name: $0, text: try String(contentsOfFile: "\(root)/\($0)", encoding: .utf8))
        }
        let blocks = try RecipeBlocks.blocks(of: documents)
        for scenario in RecipeScenarios.local + RecipeScenarios.container {
            #expect(blocks.contains { $0.scenario == scenario }, "no block for \(scenario)")
        }
        #expect(blocks.first { $0.name == "quick-start.1" }?.location == "README.md:19")
        #expect(blocks.first { $0.name == "quick-start.1" }?.body.hasPrefix("scripts/install ~/.local") == true)
    }

    /// The operations pages run in the order the index links them (a scenario's blocks span pages), then the rest.
    @Test func operationsPagesFollowTheIndexsLinks() {
        let index =
            "[Keys](docs/operations/keys.md) and [Host](docs/operations/one-host.md), again [K](docs/operations/keys.md)"
        let pages = [
            "docs/operations/monitoring.md", "docs/operations/one-host.md", "docs/operations/egress.md",
            "docs/operations/keys.md",
        ]
        #expect(
            RecipeBlocks.linkOrder(of: pages, in: index) == [
                "docs/operations/keys.md", "docs/operations/one-host.md", "docs/operations/egress.md",
                "docs/operations/monitoring.md",
            ])
    }

    @Test func extractWritesTheBlocksAndTheirLocations() throws {
        let directory = NSTemporaryDirectory() + "recipe-extract-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let blocks = try RecipeBlocks.blocks(of: [("README.md", Self.document)])
        try RecipeExtract.write(blocks, to: directory)
        #expect(try String(contentsOfFile: directory + "/quick-start.1.sh", encoding: .utf8) == "echo one\necho two\n")
        #expect(try String(contentsOfFile: directory + "/systemd.where", encoding: .utf8) == "README.md:12\n")
        #expect(!FileManager.default.fileExists(atPath: directory + "/systemd.2.sh"))
    }
}
