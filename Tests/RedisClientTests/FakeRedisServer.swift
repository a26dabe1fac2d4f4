import Foundation
import RelayTestSupport
import Synchronization
import TCPForwarder

/// A tiny TCP server on loopback that plays a broken Redis: it answers ROLE (a primary) and SCRIPT LOAD with the given
/// digest, then answers each EVALSHA it sees as its `behaviour` says. Commands are recognised by
/// their names in the byte stream (the tests' keys and arguments never contain them).
final class FakeRedisServer: Sendable {
    enum Behaviour: Sendable {
        /// `{0}` to every request of every EVALSHA.
        case allow
        /// Bytes that are not RESP.
        case garbage
        /// A bulk string where an integer is due.
        case wrongType
        /// Answers `count` EVALSHAs, then closes the connection while more are in flight.
        case closeAfter(Int)
        /// Answers nothing after the set-up.
        case silent
        /// An extra reply that no request asked for, right after the first EVALSHA's answer (while other calls are
        /// in flight: the pipeline reads the set-up's replies and a reply sent with them in one go, before any
        /// request).
        case unsolicited
    }

    let port: UInt16
    private let listener: Int32
    private let behaviour: Behaviour
    private let digest: String
    let connections = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let acceptorDone = DispatchSemaphore(value: 0)

    init(behaviour: Behaviour, digest: String) throws {
        self.behaviour = behaviour
        self.digest = digest
        let listener = try LoopbackListener()
        self.listener = listener.descriptor
        port = listener.port
        start()
    }

    private func start() {
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Stops accepting; connections being served end within 50 ms. Idempotent.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // The shutdown wakes the accept thread; the number is closed only once that thread has ended, so it
        // never calls accept on a number that another file has taken meanwhile.
        shutdown(listener, Int32(SHUT_RDWR))
        acceptorDone.wait()
        close(listener)
    }

    private func acceptLoop() {
        defer { acceptorDone.signal() }
        while !stopped.load(ordering: .acquiring) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            connections.add(1, ordering: .relaxed)
            let thread = Thread { [self] in serve(client) }
            thread.start()
        }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        var timeout = timeval(tv_sec: 0, tv_usec: 50_000)
        _ = setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var pending: [UInt8] = []
        var answered = 0
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stopped.load(ordering: .acquiring) {
            let count = recv(client, &buffer, buffer.count, 0)
            if count == 0 { return }
            if count > 0 { pending += buffer[0..<count] }
            var reply: [UInt8] = []
            while let command = Self.takeCommand(&pending) {
                let name = String(decoding: command[0], as: UTF8.self).uppercased()
                if name == "ROLE" {
                    reply += Array("*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n".utf8)
                    continue
                }
                if name == "SCRIPT" {
                    reply += Array("$\(digest.utf8.count)\r\n\(digest)\r\n".utf8)
                    continue
                }
                guard name == "EVALSHA", let tag = command.last, command.count >= 2 else { continue }
                answered += 1
                // The call's tag, then `{0}` for each of its requests (the argument before the tag has a digit each).
                let requests = command[command.count - 2].count
                let proper =
                    Array("*\(requests + 1)\r\n$\(tag.count)\r\n".utf8) + tag + Array("\r\n".utf8)
                    + Array(repeating: Array("*1\r\n:0\r\n".utf8), count: requests).joined()
                switch behaviour {
                case .allow: reply += proper
                case .unsolicited:
                    reply += proper
                    // A reply that no request asked for, with a tag no request has (tags start at 1).
                    if answered == 1 { reply += Array("*2\r\n$16\r\n0000000000000000\r\n*1\r\n:0\r\n".utf8) }
                case .garbage: reply += Array("?this is not RESP\r\n".utf8)
                case .wrongType: reply += Array("$3\r\nabc\r\n".utf8)
                case .closeAfter(let limit):
                    if answered > limit {
                        _ = reply.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                        return
                    }
                    reply += proper
                case .silent: break
                }
            }
            if !reply.isEmpty {
                _ = reply.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
    }

    /// Splits one whole command (`*N` then N bulk strings, as clients send them) off the front of `bytes`.
    private static func takeCommand(_ bytes: inout [UInt8]) -> [[UInt8]]? {
        var index = 0
        func line() -> Int? {
            var end = index
            while end + 1 < bytes.count {
                if bytes[end] == 13 && bytes[end + 1] == 10 {
                    let value = Int(String(decoding: bytes[(index + 1)..<end], as: UTF8.self))
                    index = end + 2
                    return value
                }
                end += 1
            }
            return nil
        }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "*"), let count = line() else { return nil }
        var arguments: [[UInt8]] = []
        for _ in 0..<count {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "$"), let length = line(),
                index + length + 2 <= bytes.count
            else { return nil }
            arguments.append(Array(bytes[index..<index + length]))
            index += length + 2
        }
        bytes.removeFirst(index)
        return arguments.isEmpty ? nil : arguments
    }
}

struct RedisServerFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
