import Foundation
import RelayTestSupport
import Testing

/// The harness that runs `duo-relay` as a child: what it reports must be all the child printed.
@Suite struct RelayProcessTests {
    /// A command that prints and exits at once: its last bytes and the end of its pipe arrive together.
    /// Its exit is seen with everything it printed. Before the pipes were read by blocking reads, that end
    /// was never seen: `waitForExit` returned after its 10-second wait gave up (about 40 s a run).
    @Test(arguments: [["--help"], ["serve"]])
    func aShortCommandIsSeenToExitWithAllItsOutput(_ arguments: [String]) throws {
        let process = try RelayProcess(arguments: arguments, environment: [:])
        let status = try process.waitForExit()
        #expect(process.outputHasEnded)
        if arguments == ["--help"] {
            #expect(status == 0)
            #expect(process.standardOutput.hasPrefix("usage: duo-relay <command>"))
        } else {
            #expect(status == 64)
            #expect(process.standardError.contains("--config"))
        }
    }
}
