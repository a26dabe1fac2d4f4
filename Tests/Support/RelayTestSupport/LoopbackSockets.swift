import Foundation
import TCPForwarder

#if canImport(Glibc)
    import Glibc
#endif

/// A ``LoopbackListener`` that never accepts, closed when released: connections to it complete in the kernel,
/// then nothing ever comes (a TLS handshake never finishes). Also a port that stays taken while it lives.
public final class SilentListener: Sendable {
    public let descriptor: Int32
    public let port: UInt16

    public init(backlog: Int32 = 64) throws {
        let listener = try LoopbackListener(backlog: backlog)
        descriptor = listener.descriptor
        port = listener.port
    }

    deinit { close(descriptor) }
}

/// A loopback port that was free a moment ago (for a server that cannot take port 0 and say which it got).
public func freePort() throws -> UInt16 {
    let listener = try LoopbackListener(backlog: 1)
    close(listener.descriptor)
    return listener.port
}

/// A fresh device token: 64 random lowercase hex digits.
public func randomToken() -> String {
    TestHex.random()
}

/// Whether `process` runs and listens on 127.0.0.1:`port` (or any local address), as /proc/net/tcp says.
public func isListening(port: UInt16, process: Process) -> Bool {
    process.isRunning && !LoopbackSocket.all(localPort: port, state: .listening).isEmpty
}

/// Waits until `process` listens on 127.0.0.1:`port` (at most `timeout`); false if it did not, or as soon as it
/// exited.
public func waitUntilListening(port: UInt16, process: Process, within timeout: Duration = .seconds(10)) -> Bool {
    Poll.value(within: timeout, every: .milliseconds(10)) {
        guard process.isRunning else { return false }
        return isListening(port: port, process: process) ? true : nil
    } ?? false
}

/// ``waitUntilListening(port:process:within:)`` for async tests: it suspends rather than holding a thread of the
/// cooperative pool.
public func waitUntilListening(
    port: UInt16, process: Process, within timeout: Duration = .seconds(10)
) async -> Bool {
    await Poll.suspendUntil(within: timeout) { !process.isRunning || isListening(port: port, process: process) }
    return isListening(port: port, process: process)
}

/// An IPv4 TCP socket of this machine, as /proc/net/tcp lists it.
public struct LoopbackSocket: Sendable, Equatable {
    /// The states the tests look for (the kernel's numbers, as /proc/net/tcp writes them).
    public struct State: Sendable, Hashable {
        let code: String
        public static let established = State(code: "01")
        public static let listening = State(code: "0A")
    }

    /// The local address as /proc/net/tcp writes it (`0100007F` is 127.0.0.1).
    public let localAddress: String
    public let localPort: UInt16
    public let remotePort: UInt16
    public let state: State
    /// The socket's inode, as /proc/self/fd's links name it (`socket:[inode]`).
    public let inode: String

    /// Every IPv4 TCP socket now, or those on `localPort` in `state`.
    public static func all(localPort: UInt16? = nil, state: State? = nil) -> [LoopbackSocket] {
        // Read to the end: procfs files report size 0 and come in pages.
        guard let data = FileHandle(forReadingAtPath: "/proc/net/tcp")?.readDataToEndOfFile() else { return [] }
        func port(_ field: Substring) -> UInt16? { field.split(separator: ":").last.flatMap { UInt16($0, radix: 16) } }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").dropFirst().compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count > 9, let local = port(fields[1]), let remote = port(fields[2]) else { return nil }
            let socket = LoopbackSocket(
                localAddress: String(fields[1].split(separator: ":").first ?? ""), localPort: local, remotePort: remote,
                state: State(code: String(fields[3])), inode: String(fields[9]))
            guard localPort.map({ $0 == local }) ?? true, state.map({ $0 == socket.state }) ?? true else { return nil }
            return socket
        }
    }

    /// TCP connections established now whose local end is 127.0.0.1:`port` (a server's count of its clients). The
    /// address matters: a client socket of another test, bound to another loopback address such as 127.0.0.50, may
    /// have the same local port number.
    public static func establishedCount(toLocalPort port: UInt16) -> Int {
        all(localPort: port, state: .established).count { $0.localAddress == "0100007F" }
    }

    /// The inodes of the sockets this process has open.
    public static func openInodes() -> Set<String> {
        let directory = "/proc/self/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return Set(
            entries.compactMap { entry in
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + entry),
                    target.hasPrefix("socket:[")
                else { return nil }
                return String(target.dropFirst("socket:[".count).dropLast())
            })
    }
}
