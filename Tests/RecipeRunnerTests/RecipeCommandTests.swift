import Testing

@testable import RecipeRunner

@Suite struct RecipeCommandTests {
    @Test func noCommandOrAnUnknownOneIsAUsageError() {
        #expect(RecipeCommand.run([]) == 2)
        #expect(RecipeCommand.run(["no-such-command"]) == 2)
    }

    @Test func theDocTestsCommandsWithoutTheirArgumentsAreUsageErrors() {
        #expect(RecipeCommand.run(["doc-test"]) == 2)
        #expect(RecipeCommand.run(["doc-test", "--repo", "."]) == 2)
        #expect(RecipeCommand.run(["extract"]) == 2)
    }
}
