import Foundation
import RedisTestSupport
import RelayTestSupport
import TCPForwarder

/// A throwaway `tinyproxy` (Debian's package; `scripts/install-deps --test` installs it) in the foreground on a free
/// loopback port, allowing `CONNECT` from 127.0.0.1 to any port, optionally with a Basic credential. Stopped by its
/// PID; ``restart()`` brings it back on the same port.
final class TinyproxyProcess: @unchecked Sendable {
    // @unchecked Sendable: `process` is only replaced by start/stop/restart, which a test calls from one thread.
    static let executable = "/usr/bin/tinyproxy"

    private(set) var port: UInt16 = 0
    private let directory: URL
    private let basicAuth: (user: String, password: String)?
    private var process: Process?

    /// Its PID while it runs.
    var pid: Int32? { process.flatMap { $0.isRunning ? $0.processIdentifier : nil } }

    /// What it logged (at `LogLevel Connect`: each `CONNECT` and its target).
    var log: String {
        (try? String(contentsOf: directory.appendingPathComponent("tinyproxy.log"), encoding: .utf8)) ?? ""
    }

    init(basicAuth: (user: String, password: String)? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw TestFailure("tinyproxy is not installed: run scripts/install-deps --test")
        }
        self.basicAuth = basicAuth
        directory = try RelayProcess.temporaryDirectory()
        var lastProblem = "no port"
        for _ in 0..<20 {
            // A port the kernel just gave and took back: free unless another test took it meanwhile (then retried).
            let listener = try LoopbackListener()
            close(listener.descriptor)
            port = listener.port
            do {
                try launch()
                return
            } catch {
                lastProblem = "\(error)"
            }
        }
        throw TestFailure("tinyproxy did not start: \(lastProblem)")
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    private func launch() throws {
        let config = directory.appendingPathComponent("tinyproxy.conf")
        var text = """
            Port \(port)
            Listen 127.0.0.1
            Allow 127.0.0.1
            Timeout 600
            MaxClients 100
            LogFile "\(directory.appendingPathComponent("tinyproxy.log").path)"
            LogLevel Connect
            PidFile "\(directory.appendingPathComponent("tinyproxy.pid").path)"

            """
        if let basicAuth { text += "BasicAuth \(basicAuth.user) \(basicAuth.password)\n" }
        try text.write(to: config, atomically: true, encoding: .utf8)
        process = try ServerProcess.run(
            Self.executable, ["-d", "-c", config.path], listeningOn: port, name: "tinyproxy")
    }

    /// Stops it (SIGKILL to its PID) and waits for it to exit.
    func stop() {
        ServerProcess.stop(process)
        process = nil
    }

    /// Starts it again on the same port.
    func restart() throws {
        stop()
        try ServerProcess.relaunch(launch)
    }

    /// The PIDs of the processes holding established TCP connections to 127.0.0.1:`port`, as `ss -tnpH` names them.
    static func processesConnected(to port: UInt16) throws -> [Int32] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/ss")
        if !FileManager.default.isExecutableFile(atPath: "/usr/bin/ss") {
            process.executableURL = URL(fileURLWithPath: "/bin/ss")
        }
        process.arguments = ["-tnpH", "state", "established", "( dst 127.0.0.1:\(port) )"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw TestFailure("ss failed: \(text)") }
        // Each line names its process as users:(("name",pid=N,fd=M)).
        return text.split(separator: "\n").map { line -> Int32 in
            guard let range = line.range(of: "pid=") else { return -1 }
            return Int32(line[range.upperBound...].prefix { $0.isNumber }) ?? -1
        }
    }

}

/// A fake HTTP proxy on a loopback port: reads a request head, then answers it with `answer` (nil: never answers,
/// holding the connection until it stops). For the answers no real proxy gives: garbage, silence.
final class FakeProxy: @unchecked Sendable {
    // @unchecked Sendable: `stopped` and `connections` are only touched under `lock`.
    let port: UInt16
    private let listener: LoopbackListener
    private let lock = NSLock()
    private var stopped = false
    private var connections: [Int32] = []
    private var thread: JoinableThread?

    init(answer: [UInt8]?) throws {
        listener = try LoopbackListener()
        port = listener.port
        let descriptor = listener.descriptor
        thread = try JoinableThread { [self] in
            // Bounded: each wait is 100 ms, and the loop ends once `stop()` has run.
            while !isStopped {
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) > 0 else { continue }
                let connection = accept(descriptor, nil, nil)
                guard connection >= 0 else { continue }
                keep(connection)
                Self.readHead(connection)
                if let answer { _ = answer.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, 0) } }
            }
        }
    }

    private var isStopped: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopped
    }

    private func keep(_ connection: Int32) {
        lock.lock()
        connections.append(connection)
        lock.unlock()
    }

    /// Reads until the end of a request head, or 2 s, or the peer's end.
    private static func readHead(_ connection: Int32) {
        var head: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let deadline = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < deadline && !head.suffix(4).elementsEqual(Array("\r\n\r\n".utf8)) {
            var poller = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let count = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            head += chunk[..<count]
        }
    }

    func stop() {
        lock.lock()
        stopped = true
        let open = connections
        connections = []
        lock.unlock()
        thread?.join()
        thread = nil
        for connection in open {
            shutdown(connection, Int32(SHUT_RDWR))
            close(connection)
        }
        close(listener.descriptor)
    }

    deinit {
        if !isStopped { stop() }
    }
}
