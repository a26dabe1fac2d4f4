import Glibc

/// One connection's buffers: bytes waiting to be written, and the reply reader.
struct RedisSession {
    let transport: RedisTransport
    let reader = RedisReplyReader()
    var output: [UInt8] = []
    private var written = 0
    /// Where `receive` reads into: allocated once per connection.
    private var buffer = [UInt8](repeating: 0, count: 16_384)
    /// The last write stopped short (or TLS asked to write before reading): poll for writability.
    private(set) var wantsWrite = false

    init(transport: RedisTransport) {
        self.transport = transport
    }

    /// Writes as much of `output` as the socket takes now.
    mutating func flush() -> RedisClientError? {
        wantsWrite = false
        while written < output.count {
            let progress = output.withUnsafeBytes { all in
                transport.write(UnsafeRawBufferPointer(rebasing: all[written...]))
            }
            switch progress {
            case .done(let count): written += count
            case .wouldBlock:
                wantsWrite = true
                return nil
            case .closed: return RedisClientError(.closed, "the server closed the connection")
            case .failed(let error): return error
            }
        }
        output.removeAll(keepingCapacity: output.capacity <= 65_536)
        written = 0
        return nil
    }

    /// Reads what has arrived into the reader.
    mutating func receive() -> RedisClientError? {
        if wantsWrite, let failure = flush() { return failure }
        while true {
            let progress = buffer.withUnsafeMutableBytes { transport.read(into: $0) }
            switch progress {
            case .done(let count):
                let fed = buffer.withUnsafeBytes { bytes -> RedisClientError? in
                    do throws(RedisClientError) {
                        try reader.feed(UnsafeRawBufferPointer(rebasing: bytes[0..<count]))
                        return nil
                    } catch {
                        return error
                    }
                }
                if let fed { return fed }
                if count < buffer.count { return nil }
            case .wouldBlock(let wantsWrite):
                if wantsWrite { self.wantsWrite = true }
                return nil
            case .closed: return RedisClientError(.closed, "the server closed the connection")
            case .failed(let error): return error
            }
        }
    }

    /// Writes what is queued and waits for one whole reply (the set-up commands).
    mutating func awaitReply(deadline: UInt64) -> Result<RedisReply, RedisClientError> {
        while true {
            do throws(RedisClientError) {
                if let reply = try reader.next() { return .success(reply) }
            } catch {
                return .failure(error)
            }
            if let failure = flush() { return .failure(failure) }
            let events = Int16(POLLIN) | (wantsWrite ? Int16(POLLOUT) : 0)
            guard RedisTransport.wait(transport.socket, events: events, deadline: deadline) else {
                return .failure(
                    RedisClientError(.timeout, "no reply to the set-up commands within the connect timeout"))
            }
            if let failure = receive() { return .failure(failure) }
        }
    }
}

/// Requests written and not yet answered, oldest first (replies come in this order).
struct InFlightQueue {
    enum Entry {
        case request(RedisPipeline.Request)
        /// A SCRIPT LOAD sent after NOSCRIPT: its reply belongs to no caller.
        case scriptLoad
    }

    private var entries: [Entry] = []
    private var head = 0

    mutating func append(_ entry: Entry) { entries.append(entry) }

    var isEmpty: Bool { head == entries.count }

    /// At most `count` of the oldest entries, oldest first.
    mutating func pop(upTo count: Int) -> [Entry] {
        let end = min(entries.count, head + count)
        let taken = Array(entries[head..<end])
        head = end
        if head == entries.count {
            entries.removeAll(keepingCapacity: entries.capacity <= 4_096)
            head = 0
        } else if head >= 1_024 && head * 2 >= entries.count {
            entries.removeFirst(head)
            head = 0
        }
        return taken
    }

    /// The oldest request's deadline (the earliest: deadlines grow with submission time).
    var firstDeadline: UInt64? {
        for entry in entries[head...] {
            if case .request(let request) = entry { return request.deadline }
        }
        return nil
    }

    mutating func drain() -> [Entry] {
        defer {
            entries = []
            head = 0
        }
        return Array(entries[head...])
    }
}
