import ErrorCodes
import Foundation
import RelayTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// What every throwaway server the tests run on a loopback port shares (redis-server, redis-sentinel, tinyproxy):
/// the start that waits until the server listens on its port (RelayTestSupport's `freePort` finds one), the stop by PID, the start again on the
/// same port.
public enum ServerProcess {
    /// The server could not be started or reached (why, in words).
    public struct Unavailable: CodedError {
        public let description: String
        public var code: ErrorCode<Unavailable> { ErrorCode("unavailable") }
        public var reason: String { description }
        public init(description: String) { self.description = description }
    }

    /// A loopback port that was free a moment ago: RelayTestSupport's `freePort`, under the name its callers here
    /// know; nil when the kernel gave none.
    public static func freePort() -> UInt16? {
        try? RelayTestSupport.freePort()
    }

    /// Runs `executable` with `arguments` and waits (at most 10 s) until it takes connections on 127.0.0.1:`port`;
    /// one that exits or never listens is stopped and reported as ``Unavailable``, with what `log` says then (for a
    /// process that writes one).
    public static func run(
        _ executable: String, _ arguments: [String], listeningOn port: UInt16, name: String,
        log: () -> String = { "" }
    ) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        guard waitUntilListening(port: port, process: process) else {
            guard process.isRunning else {
                let said = log()
                throw Unavailable(
                    description: "\(name) exited with \(process.terminationStatus)" + (said.isEmpty ? "" : ": " + said))
            }
            stop(process)
            throw Unavailable(description: "\(name) did not listen on \(port)")
        }
        return process
    }

    /// Stops `process` (SIGKILL to its PID) and waits for it to exit. SIGKILL: the child inherits the test thread's
    /// signal mask, in which SIGTERM may be blocked, and a throwaway server has nothing to save (an abrupt end is
    /// also what a crash looks like to the relay).
    public static func stop(_ process: Process?) {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Calls `launch` until it succeeds, for at most 10 s: the port of a server just stopped may linger a moment
    /// before it can be bound again.
    public static func relaunch(_ launch: () throws -> Void) throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            do {
                try launch()
                return
            } catch {
                if ContinuousClock.now > deadline { throw error }
                // A pace: the kernel frees the port within milliseconds of the old process's exit.
                usleep(50_000)
            }
        }
    }
}
