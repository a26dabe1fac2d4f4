import ErrorCodes
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What every throwaway server the tests run on a loopback port shares (redis-server, redis-sentinel, tinyproxy):
/// a free port, the start that waits until the server takes connections, the stop by PID, the start again on the
/// same port.
public enum ServerProcess {
    /// The server could not be started or reached (why, in words).
    public struct Unavailable: CodedError {
        public let description: String
        public var code: ErrorCode<Unavailable> { ErrorCode("unavailable") }
        public var reason: String { description }
        public init(description: String) { self.description = description }
    }

    /// A port in 20000...60000 that nothing is bound to now (nil after `attempts` taken ones).
    public static func freePort(attempts: Int = 50) -> UInt16? {
        for _ in 0..<attempts {
            let candidate = UInt16.random(in: 20_000...60_000)
            if isFree(candidate) { return candidate }
        }
        return nil
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
        guard waitUntilListening(process, port: port) else {
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

    /// Whether something accepts a TCP connection on 127.0.0.1:`port`.
    public static func accepts(_ port: UInt16) -> Bool {
        withLoopbackSocket(port) { descriptor, address, length in connect(descriptor, address, length) == 0 }
    }

    /// Whether 127.0.0.1:`port` can be bound now.
    public static func isFree(_ port: UInt16) -> Bool {
        withLoopbackSocket(port) { descriptor, address, length in bind(descriptor, address, length) == 0 }
    }

    /// Waits (at most 10 s) until `process` takes connections on `port`; false when it exited or never did.
    static func waitUntilListening(_ process: Process, port: UInt16) -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            guard process.isRunning else { return false }
            if accepts(port) { return true }
            // A pace: a server starts within milliseconds; checking ten times as often would only spin.
            usleep(10_000)
        }
        return false
    }

    /// A fresh TCP socket and 127.0.0.1:`port` for `body`; the socket is closed afterwards.
    private static func withLoopbackSocket(
        _ port: UInt16, _ body: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Bool
    ) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                body(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }
}
