import Foundation
import RelayTestSupport

/// `nghttpd` (Debian's nghttp2-server) on 127.0.0.1 with the test certificate. It echoes POST
/// bodies (`--echo-upload`) and serves files from a temporary document root.
final class NGHTTPDServer: Sendable {
    let port: Int
    let documentRoot: String
    private let process: Process
    var origin: String { "https://127.0.0.1:\(port)" }

    // Process is not Sendable, but it is only started in init and terminated in stop().
    private nonisolated(unsafe) var stopped = false

    init(
        maxConcurrentStreams: Int? = nil, files: [String: String] = [:], echo: Bool = true,
        key: String = TestPKI.shared.serverKey, certificate: String = TestPKI.shared.serverCertificate
    ) throws {
        documentRoot = NSTemporaryDirectory() + "http2client-docs-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: documentRoot, withIntermediateDirectories: true)
        for (name, content) in files {
            try content.write(toFile: documentRoot + "/" + name, atomically: true, encoding: .utf8)
        }
        var lastError: Error = TestServerError.didNotStart
        for _ in 0..<5 {
            let port = try freePort()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/nghttpd")
            var arguments = ["-a", "127.0.0.1", "-d", documentRoot]
            if echo { arguments.append("--echo-upload") }
            if let maxConcurrentStreams { arguments += ["-m", String(maxConcurrentStreams)] }
            arguments += [String(port), key, certificate]
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            if waitUntilListening(port: port, process: process) {
                self.port = port
                self.process = process
                return
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            lastError = TestServerError.didNotStart
        }
        throw lastError
    }

    deinit { stop() }

    func stop() {
        guard !stopped else { return }
        stopped = true
        // SIGKILL: the child inherits the test runner's blocked signals, SIGTERM included.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: documentRoot)
    }

    /// TCP connections established to the server now, counted on the server's side.
    var establishedConnections: Int { establishedConnectionCount(toLocalPort: port) }
}

enum TestServerError: Error { case didNotStart }

/// A TCP socket on 127.0.0.1 that listens and never accepts nor answers: connections complete
/// in the kernel, then nothing ever comes (a TLS handshake never finishes).
final class SilentServer: Sendable {
    let port: Int
    private let descriptor: Int32
    var origin: String { "https://127.0.0.1:\(port)" }

    init() throws {
        (descriptor, port) = try listeningSocket()
    }

    deinit { close(descriptor) }
}

/// A port on 127.0.0.1 that was free a moment ago (nghttpd cannot take port 0).
func freePort() throws -> Int {
    let (descriptor, port) = try listeningSocket(listen: false)
    close(descriptor)
    return port
}

private func listeningSocket(listen shouldListen: Bool = true) throws -> (Int32, Int) {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw TestServerError.didNotStart }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard bound == 0, !shouldListen || listen(descriptor, 64) == 0 else {
        close(descriptor)
        throw TestServerError.didNotStart
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
    }
    return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
}

private func waitUntilListening(port: Int, process: Process) -> Bool {
    Poll.until(within: .seconds(10), every: .milliseconds(20)) {
        process.isRunning && establishedConnectionCount(toLocalPort: port, state: "0A") > 0
    }
}

/// Sockets in /proc/net/tcp whose local port is `port`, in `state` ("01" established, "0A" listening).
func establishedConnectionCount(toLocalPort port: Int, state: String = "01") -> Int {
    // Read to the end: procfs files report size 0 and come in pages.
    guard let data = FileHandle(forReadingAtPath: "/proc/net/tcp")?.readDataToEndOfFile() else { return 0 }
    let table = String(decoding: data, as: UTF8.self)
    let suffix = ":" + String(format: "%04X", port)
    return table.split(separator: "\n").dropFirst().filter { line in
        let fields = line.split(separator: " ")
        return fields.count > 3 && fields[1].hasSuffix(suffix) && fields[3] == state
    }.count
}
