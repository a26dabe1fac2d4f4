import EventLoops
import Foundation
import Synchronization

/// A loopback HTTP/1.1 server on a loop of its own, for the load generator's tests: answers each request
/// (a head, then `Content-Length` bytes of body) with what `answer` says, after `delayMilliseconds`, and
/// records what it saw.
final class TestHTTPServer: Sendable {
    struct Answer: Sendable {
        var status = 200
        var body = "{}"
        /// Closes the connection once the answer is written.
        var close = false
        /// Closes the connection (a reset) instead of answering.
        var drop = false
    }

    struct Seen: Sendable {
        var connections = 0
        var requests: [String] = []
        /// Requests that arrived while an earlier one on the same connection was still unanswered.
        var overlapping = 0
    }

    let loop: EventLoop
    let port: UInt16
    private let record = Record()

    /// What the server saw, shared by its connections.
    private final class Record: Sendable {
        let seen = Mutex(Seen())
    }

    init(
        delayMilliseconds: UInt64 = 0,
        answer: @escaping @Sendable (_ index: Int, _ path: String) -> Answer = { _, _ in Answer() }
    ) throws {
        let loop = try EventLoop(name: "test-http")
        self.loop = loop
        let record = self.record
        port = try loop.performAndWait {
            let listener = try TCPListener(on: loop, host: "127.0.0.1", port: 0) { connection in
                record.seen.withLock { $0.connections += 1 }
                let side = ServerSide(record: record, delay: delayMilliseconds, answer: answer)
                connection.delegate = side
                connection.startReading()
            }
            return listener.port
        }
    }

    var observed: Seen { record.seen.withLock { $0 } }

    func stop() { loop.stop() }

    /// One accepted connection: frames requests, answers them in order.
    private final class ServerSide: TCPConnectionDelegate {
        let record: Record
        let delay: UInt64
        let answer: @Sendable (Int, String) -> Answer
        var inbound: [UInt8] = []
        var unanswered = 0
        /// Delayed answers, in order, with the loop time they are due.
        var pending: [(due: UInt64, reply: Answer)] = []
        var timer: LoopTimer?

        init(record: Record, delay: UInt64, answer: @escaping @Sendable (Int, String) -> Answer) {
            self.record = record
            self.delay = delay
            self.answer = answer
        }

        func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
            inbound.append(contentsOf: bytes)
            while let (path, length) = Self.request(in: inbound) {
                inbound.removeFirst(length)
                let index = record.seen.withLock { seen -> Int in
                    if unanswered > 0 { seen.overlapping += 1 }
                    seen.requests.append(path)
                    return seen.requests.count - 1
                }
                unanswered += 1
                let reply = answer(index, path)
                if delay == 0 {
                    send(reply, on: connection)
                } else {
                    pending.append((connection.loop.now + delay, reply))
                    if timer == nil {
                        timer = LoopTimer(on: connection.loop) { [self] in sendDue(on: connection) }
                    }
                    if timer?.isScheduled == false { timer?.schedule(at: pending[0].due) }
                }
            }
        }

        func sendDue(on connection: TCPConnection) {
            while let first = pending.first, first.due <= connection.loop.now {
                pending.removeFirst()
                send(first.reply, on: connection)
            }
            if let first = pending.first { timer?.schedule(at: first.due) }
        }

        func send(_ reply: Answer, on connection: TCPConnection) {
            unanswered -= 1
            guard !reply.drop else {
                connection.reset()
                return
            }
            let body = Array(reply.body.utf8)
            connection.write(Array("HTTP/1.1 \(reply.status) X\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body)
            if reply.close { connection.closeAfterWriting() }
        }

        /// The path and length of the complete request at the start of `bytes`.
        static func request(in bytes: [UInt8]) -> (String, Int)? {
            guard let headEnd = (0..<max(0, bytes.count - 3)).first(where: { bytes[$0..<$0 + 4] == [13, 10, 13, 10] })
            else { return nil }
            let head = String(decoding: bytes[..<headEnd], as: UTF8.self)
            let lines = head.split(separator: "\r\n")
            let path = lines.first.map { String($0.split(separator: " ")[1]) } ?? ""
            let length =
                lines.dropFirst().compactMap { line -> Int? in
                    let parts = line.split(separator: ":", maxSplits: 1)
                    guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                    return Int(parts[1].trimmingCharacters(in: .whitespaces))
                }.first ?? 0
            guard bytes.count >= headEnd + 4 + length else { return nil }
            return (path, headEnd + 4 + length)
        }

        func connectionDidReachEnd(_ connection: TCPConnection) { end(connection) }
        func connection(_ connection: TCPConnection, didFail error: LoopError) { end(connection) }

        func end(_ connection: TCPConnection) {
            timer?.close()
            connection.close()
        }
    }
}
