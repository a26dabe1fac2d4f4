import COpenSSL
import CSystem
import ClientTLS
import Foundation
import Synchronization

/// A pipelined connection to Redis that runs one Lua script: every caller's `EVALSHA` goes into a
/// queue, and the connection's own thread writes whatever has queued up in one write and matches
/// the replies, in order, to their callers. A request's answer never waits past ``RedisClientConfiguration/timeout``.
///
/// Every request carries a tag (its sequence number, appended as the script's last `ARGV`), which
/// the script must return first in a two-element array `{tag, integer}`: a reply that answers some
/// other request is caught, not handed to the wrong caller.
///
/// While not connected, ``evaluate(keys:arguments:completion:)`` refuses at once (the caller decides
/// without the store); the thread reconnects with a growing delay (50 ms doubling to 5 s, with
/// jitter) and reports each loss and return once through the event handler.
public final class RedisPipeline: Sendable {
    public enum Event: Sendable, Equatable {
        /// Connected, authenticated, script loaded: requests are sent from now on.
        case connected
        /// The connection was lost or could not be made (reported once per loss, not per attempt).
        case lost(RedisClientError)
    }

    /// The answer to one ``evaluate(keys:arguments:completion:)``: the script's integer, or why there is none.
    public typealias Completion = @Sendable (Result<Int64, RedisClientError>) -> Void

    /// One call of the script prepared once: its command formatted by hiredis with a key and a tag of
    /// fixed lengths, so that a request only copies it and writes its own key and tag into their places.
    public struct PreparedCall: Sendable {
        let template: [UInt8]
        let keyRange: Range<Int>
        let tagRange: Range<Int>
    }

    struct Request {
        let command: [UInt8]
        let tag: UInt64
        let completion: Completion
        let submitted: UInt64
        var deadline: UInt64
        var retried = false
    }

    private struct Shared {
        var ready = false
        var stopping = false
        var queue: [Request] = []
        var wakePending = false
        var firstAttemptDone = false
        /// Requests written and not yet answered, in the order of their bytes on the wire.
        var inFlight = InFlightQueue()
        /// The plain TCP socket callers may write to themselves (-1: none, or TLS, whose `SSL` only the
        /// connection's thread uses). Cleared under this lock before the socket is closed.
        var direct: Int32 = -1
        /// The connection's thread holds bytes not yet written: callers must queue behind them.
        var outputPending = false
        /// What a caller's write left unwritten: the connection's thread sends it before anything else.
        var carry: [UInt8] = []
        /// The recent round trip (nanoseconds): a moving average of each batch of replies' shortest latency.
        var roundTrip: UInt64 = .max
    }

    private let configuration: RedisClientConfiguration
    private let tls: TLSClientContext?
    private let onEvent: @Sendable (Event) -> Void
    private let shared = Mutex(Shared())
    private let wakeDescriptor: Int32
    /// Whether the connection's thread was started, and signalled when it has ended.
    private let threadStarted = Atomic<Bool>(false)
    private let threadEnded = DispatchSemaphore(value: 0)
    /// The script's SHA-1 in hex, as EVALSHA names it.
    public let scriptDigest: String
    private let scriptDigestBytes: [UInt8]
    private let evalsha: [UInt8] = Array("EVALSHA".utf8)
    private let nextTag = Atomic<UInt64>(1)
    private let timeoutNanoseconds: UInt64
    /// How often the connection's thread checks deadlines while waiting (a caller's own write does not
    /// wake it): a tenth of the timeout, at most 10 ms. Requests written by callers get a deadline this
    /// much earlier, so that none waits past the timeout.
    private let deadlineCheckNanoseconds: UInt64
    /// The longest recent round trip at which requests queued behind others wait for the next reply rather than
    /// wake the connection's thread: a Redis on the same host or in the same rack (0.25 ms).
    static let batchingRoundTrip: UInt64 = 250_000
    let statistics = Mutex(RedisPipelineStatistics())

    public init(
        configuration: RedisClientConfiguration, onEvent: @escaping @Sendable (Event) -> Void
    ) throws(RedisClientError) {
        self.configuration = configuration
        self.onEvent = onEvent
        timeoutNanoseconds = max(1_000_000, Self.nanoseconds(configuration.timeout))
        deadlineCheckNanoseconds = min(10_000_000, timeoutNanoseconds / 10)
        if configuration.useTLS {
            do {
                tls = try TLSClientContext(extraCAFile: configuration.caFile, alpn: [])
            } catch {
                throw RedisClientError(.invalidConfiguration, error.reason)
            }
        } else {
            tls = nil
        }
        scriptDigest = Self.sha1Hex(Array(configuration.script.utf8))
        scriptDigestBytes = Array(scriptDigest.utf8)
        wakeDescriptor = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeDescriptor >= 0 else {
            throw RedisClientError(.invalidConfiguration, "eventfd failed")
        }
    }

    deinit { _ = Glibc.close(wakeDescriptor) }

    /// Starts the connection's thread.
    public func start() {
        guard !threadStarted.exchange(true, ordering: .relaxed) else { return }
        let thread = Thread { [self] in
            run()
            threadEnded.signal()
        }
        thread.start()
    }

    /// Waits (at most `timeout`) until the first connection attempt has ended; true when connected.
    public func awaitFirstAttempt(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let (done, ready) = shared.withLock { ($0.firstAttemptDone, $0.ready) }
            if done { return ready }
            usleep(2_000)
        }
        return isConnected
    }

    /// Ends the thread and waits for it (at most the connect timeout, when it is connecting); queued requests
    /// are answered `.unavailable`. Once this returns, no completion runs any more and none is held: callers
    /// that captured their owner in a completion are not kept alive by this connection.
    public func shutdown() {
        shared.withLock { $0.stopping = true }
        wake()
        guard threadStarted.load(ordering: .relaxed) else { return }
        let limit = DispatchTime.now() + .nanoseconds(Int(Self.nanoseconds(configuration.connectTimeout)))
        // Passed on, so that a second shutdown returns at once too.
        if threadEnded.wait(timeout: limit) == .success { threadEnded.signal() }
    }

    public var isConnected: Bool { shared.withLock { $0.ready } }

    /// A snapshot of the counters.
    public var currentStatistics: RedisPipelineStatistics { statistics.withLock { $0 } }

    /// Runs the script with `keys` and `arguments` (and the tag after them). Returns false at once, without calling
    /// `completion`, when not connected; otherwise `completion` is called exactly once, on the
    /// connection's thread, within the timeout.
    public func evaluate(keys: [[UInt8]], arguments: [[UInt8]], completion: @escaping Completion) -> Bool {
        let tag = nextTag.add(1, ordering: .relaxed).oldValue
        var command: [UInt8] = []
        command.reserveCapacity(160)
        RedisCommand.append(commandParts(keys: keys, arguments: arguments, tag: RedisTag.bytes(tag)), to: &command)
        return submit(command, tag: tag, completion: completion)
    }

    /// Prepares the script's call with one key of `keyLength` bytes and `arguments`, for
    /// ``evaluate(_:key:completion:)``.
    public func prepare(keyLength: Int, arguments: [[UInt8]]) -> PreparedCall {
        // Formatted three times with different filler bytes: where the bytes differ is where the key and the tag are.
        func formatted(key: UInt8, tag: UInt8) -> [UInt8] {
            var bytes: [UInt8] = []
            let parts = commandParts(
                keys: [[UInt8](repeating: key, count: keyLength)], arguments: arguments,
                tag: [UInt8](repeating: tag, count: RedisTag.length))
            RedisCommand.append(parts, to: &bytes)
            return bytes
        }
        let base = formatted(key: 0x30, tag: 0x30)
        func differing(_ other: [UInt8]) -> Range<Int> {
            let differs = base.indices.filter { base[$0] != other[$0] }
            return differs.first!..<differs.last! + 1
        }
        let keyRange = differing(formatted(key: 0x31, tag: 0x30))
        let tagRange = differing(formatted(key: 0x30, tag: 0x31))
        precondition(keyRange.count == keyLength && tagRange.count == RedisTag.length)
        return PreparedCall(template: base, keyRange: keyRange, tagRange: tagRange)
    }

    /// ``evaluate(keys:arguments:completion:)`` with a prepared call and its one key (of the prepared length).
    public func evaluate(_ call: PreparedCall, key: [UInt8], completion: @escaping Completion) -> Bool {
        precondition(key.count == call.keyRange.count, "the key's length is the prepared one")
        return evaluate(call, writingKey: { key.withUnsafeBytes($0.copyMemory(from:)) }, completion: completion)
    }

    /// The same, with the key written by `writingKey` straight into the command, in the prepared length's bytes.
    public func evaluate(
        _ call: PreparedCall, writingKey: (UnsafeMutableRawBufferPointer) -> Void, completion: @escaping Completion
    ) -> Bool {
        let tag = nextTag.add(1, ordering: .relaxed).oldValue
        var command = call.template
        command.withUnsafeMutableBytes { bytes in
            writingKey(UnsafeMutableRawBufferPointer(rebasing: bytes[call.keyRange]))
            RedisTag.write(tag, to: UnsafeMutableRawBufferPointer(rebasing: bytes[call.tagRange]))
        }
        return submit(command, tag: tag, completion: completion)
    }

    private func commandParts(keys: [[UInt8]], arguments: [[UInt8]], tag: [UInt8]) -> [[UInt8]] {
        var parts: [[UInt8]] = [evalsha, scriptDigestBytes, Array(String(keys.count).utf8)]
        parts.append(contentsOf: keys)
        parts.append(contentsOf: arguments)
        parts.append(tag)
        return parts
    }

    private func submit(_ command: [UInt8], tag: UInt64, completion: @escaping Completion) -> Bool {
        let now = Monotonic.now
        let request = Request(
            command: command, tag: tag, completion: completion, submitted: now, deadline: now + timeoutNanoseconds)
        let wakeNeeded: Bool? = shared.withLock { state in
            guard state.ready, !state.stopping else { return nil }
            // At low rates, waking the connection's thread to write costs more than the write: on an
            // idle connection the caller writes its own command (the thread, polling for the reply,
            // never needs to wake for it; it checks deadlines every `deadlineCheck`). Under load,
            // requests queue and the thread, awake for replies anyway, writes them in batches.
            if state.direct >= 0 && !state.outputPending && state.queue.isEmpty && state.inFlight.isEmpty {
                let written = command.withUnsafeBytes {
                    send(state.direct, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                }
                if written > 0 {
                    var direct = request
                    direct.deadline = now + timeoutNanoseconds - deadlineCheckNanoseconds
                    state.inFlight.append(.request(direct))
                    guard written < command.count else { return false }
                    state.carry = Array(command[written...])
                    state.outputPending = true
                    defer { state.wakePending = true }
                    return !state.wakePending
                }
            }
            state.queue.append(request)
            // While requests are in flight to a near server, the thread wakes for their replies soon and writes
            // what has queued then: no wake-up of its own (a request waits at most one short round trip more).
            // A far server's round trip is too long to wait: the thread is woken to write at once.
            if state.wakePending || (!state.inFlight.isEmpty && state.roundTrip <= Self.batchingRoundTrip) {
                return false
            }
            state.wakePending = true
            return true
        }
        guard let wakeNeeded else { return false }
        if wakeNeeded { wake() }
        return true
    }

    private func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeDescriptor, &one, 8)
    }

    // MARK: The thread

    private func run() {
        _ = csystem_set_thread_name("redis-limits")
        defer { OPENSSL_thread_stop() }
        var failures = 0
        var reportedUp: Bool? = nil
        while !shared.withLock({ $0.stopping }) {
            let outcome = connectAndServe(onReady: {
                failures = 0
                if reportedUp != true {
                    reportedUp = true
                    onEvent(.connected)
                }
            })
            let queued = shared.withLock { state -> [Request] in
                state.ready = false
                state.firstAttemptDone = true
                defer { state.queue = [] }
                return state.queue
            }
            let stopping = shared.withLock { $0.stopping }
            for request in queued {
                request.completion(.failure(stopping ? RedisClientError(.unavailable, "shutting down") : outcome))
            }
            if stopping { break }
            statistics.withLock { $0.errors[outcome.code.name, default: 0] += 1 }
            if reportedUp != false {
                reportedUp = false
                onEvent(.lost(outcome))
            }
            failures += 1
            let base = min(5_000, 50 << min(failures - 1, 7))
            let delay = base + Int.random(in: 0...(base / 5))
            pause(milliseconds: delay)
        }
    }

    /// Waits `milliseconds`, or less if woken to stop.
    private func pause(milliseconds: Int) {
        let deadline = Monotonic.now + UInt64(milliseconds) * 1_000_000
        while !shared.withLock({ $0.stopping }) {
            let now = Monotonic.now
            guard now < deadline else { return }
            var entry = pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, Int32(clamping: (deadline - now) / 1_000_000 + 1))
            drainWake()
        }
    }

    private func drainWake() {
        var value: UInt64 = 0
        _ = Glibc.read(wakeDescriptor, &value, 8)
    }

    /// One connection's life: connect, set up, serve until it fails. Returns why it ended.
    private func connectAndServe(onReady: () -> Void) -> RedisClientError {
        let deadline = Monotonic.now + Self.nanoseconds(configuration.connectTimeout)
        let transport: RedisTransport
        switch RedisTransport.connect(
            host: configuration.host, port: configuration.port, tls: tls, deadline: deadline)
        {
        case .success(let connected): transport = connected
        case .failure(let error): return error
        }
        defer { transport.close() }
        statistics.withLock { $0.connectionsOpened += 1 }
        var session = RedisSession(transport: transport)
        if let failure = setUp(&session, deadline: deadline) { return failure }
        shared.withLock { state in
            state.ready = !state.stopping
            state.firstAttemptDone = true
        }
        onReady()
        return serve(&session)
    }

    /// AUTH, SELECT and SCRIPT LOAD, in one write, their replies checked in order.
    private func setUp(_ session: inout RedisSession, deadline: UInt64) -> RedisClientError? {
        var commands: [[[UInt8]]] = []
        if let password = configuration.password {
            var auth = [Array("AUTH".utf8)]
            if let username = configuration.username { auth.append(Array(username.utf8)) }
            auth.append(Array(password.utf8))
            commands.append(auth)
        }
        if configuration.database != 0 {
            commands.append(RedisCommand.bytes("SELECT", String(configuration.database)))
        }
        commands.append(RedisCommand.bytes("SCRIPT", "LOAD", configuration.script))
        for command in commands { RedisCommand.append(command, to: &session.output) }
        for (index, command) in commands.enumerated() {
            let reply: RedisReply
            switch session.awaitReply(deadline: deadline) {
            case .success(let received): reply = received
            case .failure(let error): return error
            }
            let isAuth = configuration.password != nil && index == 0
            let isScriptLoad = index == commands.count - 1
            if case .error(let message) = reply {
                // NOAUTH: the server wants a password and none was configured; WRONGPASS: refused.
                if isAuth || message.hasPrefix("NOAUTH") || message.hasPrefix("WRONGPASS") {
                    return RedisClientError(.auth, "the server refused AUTH (\(Self.errorName(message)))")
                }
                let what = String(decoding: command[0], as: UTF8.self)
                return RedisClientError(.script, "\(what) was refused (\(Self.errorName(message)))")
            }
            if isScriptLoad {
                guard case .bulk(let digest?) = reply, digest.map({ $0 | 0x20 }) == scriptDigestBytes else {
                    return RedisClientError(.protocolError, "SCRIPT LOAD did not answer the script's SHA-1")
                }
            } else if reply != .status("OK") {
                return RedisClientError(
                    .protocolError, "an unexpected reply to \(String(decoding: command[0], as: UTF8.self))")
            }
        }
        return nil
    }

    /// Until the connection fails: sends what callers queued, hands replies to them, enforces deadlines.
    private func serve(_ session: inout RedisSession) -> RedisClientError {
        let scriptLoad = { () -> [UInt8] in
            var bytes: [UInt8] = []
            RedisCommand.append(RedisCommand.bytes("SCRIPT", "LOAD", configuration.script), to: &bytes)
            return bytes
        }()
        var fds = [
            pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: session.transport.socket, events: Int16(POLLIN), revents: 0),
        ]
        func failAll(_ error: RedisClientError) -> RedisClientError {
            // No caller writes to the socket from here on: it is closed after this returns.
            let entries = shared.withLock { state in
                state.ready = false
                state.direct = -1
                state.outputPending = false
                state.carry = []
                return state.inFlight.drain()
            }
            for entry in entries {
                if case .request(let request) = entry { request.completion(.failure(error)) }
            }
            return error
        }
        var parsed: [RedisReplyReader.Parsed] = []
        var latencies: [UInt64] = []
        let plainSocket = tls == nil ? session.transport.socket : -1
        shared.withLock { $0.direct = plainSocket }
        while true {
            let (stopping, firstDeadline) = shared.withLock { state -> (Bool, UInt64?) in
                state.wakePending = false
                // The batch's shortest wait: the round trip with the least queueing in it (under load the later
                // replies of a batch also waited for the ones before them).
                if let latest = latencies.min() {
                    state.roundTrip = state.roundTrip == .max ? latest : (state.roundTrip * 7 + latest) / 8
                    latencies.removeAll(keepingCapacity: true)
                }
                if !state.carry.isEmpty {
                    session.output.append(contentsOf: state.carry)
                    state.carry = []
                }
                for request in state.queue {
                    session.output.append(contentsOf: request.command)
                    state.inFlight.append(.request(request))
                }
                state.queue = []
                if !session.output.isEmpty { state.outputPending = true }
                return (state.stopping, state.inFlight.firstDeadline)
            }
            if stopping { return failAll(RedisClientError(.unavailable, "shutting down")) }
            if !session.output.isEmpty {
                if let failure = session.flush() { return failAll(failure) }
                if session.output.isEmpty { shared.withLock { $0.outputPending = false } }
            }
            // Callers may have written since: without a deadline in view, look again soon.
            var timeout = Int32(clamping: (deadlineCheckNanoseconds + 999_999) / 1_000_000)
            if let deadline = firstDeadline {
                let now = Monotonic.now
                if now >= deadline {
                    return failAll(RedisClientError(.timeout, "no reply within \(configuration.timeout)"))
                }
                timeout = min(timeout, Int32(clamping: (deadline - now + 999_999) / 1_000_000))
            }
            fds[1].events = Int16(POLLIN) | (session.wantsWrite ? Int16(POLLOUT) : 0)
            fds[0].revents = 0
            fds[1].revents = 0
            let ready = poll(&fds, 2, timeout)
            if ready < 0 && errno != EINTR {
                return failAll(RedisClientError(.closed, "poll failed"))
            }
            if fds[0].revents != 0 { drainWake() }
            guard fds[1].revents != 0 else { continue }
            if let failure = session.receive() { return failAll(failure) }
            if session.output.isEmpty && session.wantsWrite == false {
                // `receive` may have flushed what was pending.
                shared.withLock { state in if state.carry.isEmpty && state.queue.isEmpty { state.outputPending = false }
                }
            }
            // Every whole reply that has arrived, then their requests, taken from the queue under one lock.
            parsed.removeAll(keepingCapacity: true)
            var readFailure: RedisClientError?
            while readFailure == nil {
                do throws(RedisClientError) {
                    guard let next = try session.reader.nextParsed() else { break }
                    parsed.append(next)
                } catch {
                    readFailure = error
                }
            }
            let entries = parsed.isEmpty ? [] : shared.withLock { $0.inFlight.pop(upTo: parsed.count) }
            let now = Monotonic.now
            latencies.removeAll(keepingCapacity: true)
            // Once set, nothing after it can be trusted: the rest of the batch fails with it.
            var failure: RedisClientError?
            for (entry, reply) in zip(entries, parsed) {
                if let failure {
                    if case .request(let request) = entry { request.completion(.failure(failure)) }
                    continue
                }
                switch (entry, reply) {
                case (.scriptLoad, .other(.bulk(let digest?))) where digest.map({ $0 | 0x20 }) == scriptDigestBytes:
                    continue
                case (.scriptLoad, _):
                    failure = RedisClientError(.protocolError, "SCRIPT LOAD did not answer the script's SHA-1")
                case (.request(let request), .tagged(let tag, let value)) where tag == request.tag:
                    latencies.append(now - request.submitted)
                    request.completion(.success(value))
                case (.request(let request), .other(.array(let parts?)))
                where parts.count == 2 && parts[0] == .bulk(RedisTag.bytes(request.tag)):
                    // Its own tag, but not an integer with it.
                    failure = RedisClientError(.protocolError, "an unexpected reply type")
                    request.completion(.failure(failure!))
                case (.request(var request), .other(.error(let message))):
                    if message.hasPrefix("NOSCRIPT") && !request.retried {
                        // The server lost its scripts (restart without our reconnecting, SCRIPT FLUSH,
                        // failover): load it again and send this request once more, both in one write.
                        request.retried = true
                        // Under the lock: these bytes go out before any caller's own write.
                        shared.withLock { state in
                            session.output.append(contentsOf: state.carry)
                            state.carry = []
                            session.output.append(contentsOf: scriptLoad)
                            session.output.append(contentsOf: request.command)
                            state.inFlight.append(.scriptLoad)
                            state.inFlight.append(.request(request))
                            state.outputPending = true
                        }
                        statistics.withLock { $0.scriptReloads += 1 }
                    } else {
                        statistics.withLock { $0.errors[RedisClientError.Code.script.name, default: 0] += 1 }
                        request.completion(
                            .failure(RedisClientError(.script, "the script failed (\(Self.errorName(message)))")))
                    }
                case (.request(let request), _):
                    // A reply of the wrong shape or with another request's tag.
                    failure = RedisClientError(.protocolError, "a reply for another request")
                    request.completion(.failure(failure!))
                }
            }
            if !latencies.isEmpty {
                statistics.withLock { statistics in
                    for latency in latencies { statistics.record(latency: Double(latency) / 1e9) }
                }
            }
            if let failure { return failAll(failure) }
            if entries.count < parsed.count {
                return failAll(RedisClientError(.protocolError, "a reply that no request asked for"))
            }
            if let readFailure { return failAll(readFailure) }
        }
    }

    /// The first word of an error reply (`WRONGPASS`, `NOSCRIPT`, `ERR`): its code, never the rest,
    /// which may quote a command's arguments.
    static func errorName(_ message: String) -> String {
        String(
            message.prefix { $0 != " " }.prefix(32).filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
    }

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    static func sha1Hex(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = EVP_Digest(bytes, bytes.count, &digest, &length, EVP_sha1(), nil)
        return digest.prefix(Int(length)).map { String($0, radix: 16).leftPadded }.joined()
    }
}

extension String {
    fileprivate var leftPadded: String { count == 1 ? "0" + self : self }
}
