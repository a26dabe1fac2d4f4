import Testing

@testable import RecipeRunner

@Suite struct RecipeCommandTests {
    @Test func noCommandOrAnUnknownOneIsAUsageError() {
        #expect(RecipeCommand.run([]) == 2)
        #expect(RecipeCommand.run(["no-such-command"]) == 2)
    }
}
