import Dispatch
import Glibc
import RelayTestSupport
import Synchronization
import Testing

@testable import EventLoops

/// Every suite of this target runs one test at a time, so that a test's loops and sockets are the only ones
/// of this target when it looks at /proc/self/fd.
@Suite(.serialized) enum EventLoopsSuite {}

/// RelayTestSupport's recorder and failure, by the names this target's tests use (visible in every file of it,
/// whether or not the file imports RelayTestSupport).
typealias Recorder<Event: Sendable> = RelayTestSupport.Recorder<Event>
typealias TestFailure = RelayTestSupport.TestFailure

/// A blocking loopback client for the tests: reads and writes with a 10 s bound.
final class TestClient {
    let descriptor: Int32

    init(port: UInt16, ipv6: Bool = false) throws {
        descriptor = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let result: Int32
        if ipv6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = in6addr_loopback
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(descriptor)
            throw TestFailure("connect failed: errno \(code)")
        }
    }

    deinit { Glibc.close(descriptor) }

    /// The client's own port (the server's view of the peer's port).
    var localPort: UInt16 {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return withUnsafeBytes(of: &address) { raw in UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self)) }
    }

    func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, 0) }
            guard sent > 0 else { throw TestFailure("send failed: errno \(errno)") }
            offset += sent
        }
    }

    /// Reads exactly `count` bytes (fewer only if the server closes).
    func receive(count: Int, chunk: Int = 64 * 1024) throws -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        var buffer = [UInt8](repeating: 0, count: chunk)
        while bytes.count < count {
            let wanted = min(chunk, count - bytes.count)
            let got = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, wanted, 0) }
            if got == 0 { break }
            guard got > 0 else { throw TestFailure("recv failed: errno \(errno)") }
            bytes.append(contentsOf: buffer[0..<got])
        }
        return bytes
    }

    /// True when the server has closed its side: the next read meets end of input.
    func readsEndOfInput() -> Bool {
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, 0) == 0
    }

    func shutdownOutput() {
        _ = shutdown(descriptor, Int32(SHUT_WR))
    }

    /// Makes the close a reset (SO_LINGER 0); the close comes when the client is released.
    func resetOnClose() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }
}

/// The targets of this process's open descriptors, as /proc/self/fd shows them (`socket:[1234]`, …).
func openDescriptors() -> [String] {
    guard let directory = opendir("/proc/self/fd") else { return [] }
    defer { closedir(directory) }
    var targets: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        guard Int32(name) != nil else { continue }
        var target = [CChar](repeating: 0, count: 256)
        let length = readlink("/proc/self/fd/\(name)", &target, 255)
        if length > 0 {
            targets.append(String(decoding: target[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }
    return targets
}

/// What /proc/self/fdinfo says of a descriptor (for an epoll set: the descriptors it watches), or "".
func descriptorInfo(_ number: Int32) -> String {
    guard let file = fopen("/proc/self/fdinfo/\(number)", "r") else { return "" }
    defer { fclose(file) }
    var text = ""
    var line = [CChar](repeating: 0, count: 512)
    while fgets(&line, 512, file) != nil {
        text += String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    return text
}

/// The inode of a descriptor's socket, as /proc/self/fd names it (`socket:[inode]`).
func socketName(of descriptor: Int32) -> String {
    var status = stat()
    _ = fstat(descriptor, &status)
    return "socket:[\(status.st_ino)]"
}
