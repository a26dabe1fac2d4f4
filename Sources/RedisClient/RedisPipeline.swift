import COpenSSL
import ClientTLS
import Glibc
import Loop
import LoopTLS
import Synchronization

/// A pipelined connection to Redis that runs one Lua script, on one event loop: the shell around
/// ``RedisPipelineMachine``. It owns the stream (``LoopTLS/ClientStream``: plain for `redis://`, TLS for
/// `rediss://`), hiredis's reply reader, and one ``Loop/LoopTimer`` for every deadline (a request's
/// ``RedisClientConfiguration/timeout``, the connect timeout, the next reconnection); it starts no thread.
///
/// Every request carries a tag (its sequence number, appended as the script's last `ARGV`), which the script must
/// return first in an array `{tag, integer[, integer]}`: a reply that answers some other request is caught, not
/// handed to the wrong caller.
///
/// While not connected, ``evaluate(keys:arguments:completion:)`` refuses at once (the caller decides without the
/// store); the pipeline reconnects with a growing delay (50 ms doubling to 5 s, with jitter) and reports each loss
/// and return once through the event handler.
///
/// Threading: made and used on its loop's thread, requests cost no lock and no thread crossing, and completions
/// and events run on that thread. Called from another thread, a request hops to the loop (`loop.execute`).
// @unchecked Sendable: `machine`, `stream`, `reader`, `timer`, `armedDeadline`, `statistics` and `started` are used
// only on `loop`'s thread (every path to them runs there: checked, or reached through `loop.execute` or
// `performAndWait`); the rest is immutable or atomic.
public final class RedisPipeline: @unchecked Sendable {
    public typealias Event = RedisPipelineEvent

    /// The answer to one request: the script's integers after the tag, or why there are none.
    public typealias Completion = @Sendable (Result<RedisScriptAnswer, RedisClientError>) -> Void

    /// One call of the script prepared once: its command formatted by hiredis with keys of fixed lengths, so that
    /// a request only copies it and writes its own keys (and the pipeline its tag) into their places.
    public struct PreparedCall: Sendable {
        let template: [UInt8]
        let keyRanges: [Range<Int>]
        /// The script's digest it names: usable with every pipeline of that script.
        let scriptDigest: String
    }

    public let loop: EventLoop
    /// The script's SHA-1 in hex, as EVALSHA names it.
    public let scriptDigest: String

    private let configuration: RedisClientConfiguration
    private let tls: ClientStream.TLS?
    private let onEvent: @Sendable (Event) -> Void
    private let now: @Sendable () -> UInt64
    /// The loop was made for this pipeline alone (stopped with it).
    private let ownsLoop: Bool
    private let connected = Atomic<Bool>(false)
    private let firstAttemptDone = Atomic<Bool>(false)

    // Loop-thread state.
    private var machine: RedisPipelineMachine<Completion>
    private var stream: ClientStream?
    private var reader = RedisReplyReader()
    private var timer: LoopTimer?
    /// The deadline `timer` is scheduled for (the machine's nanoseconds).
    private var armedDeadline: UInt64?
    private var statistics = RedisPipelineStatistics()
    private var started = false
    /// A write of the output is due at the start of the loop's next turn (``scheduleFlush()``).
    private var flushScheduled = false

    /// A pipeline on `loop` (a worker's): nothing happens until ``start()``.
    ///
    /// - Parameter now: monotonic nanoseconds (the relay's clock); the timer waits on the loop's own clock.
    public convenience init(
        configuration: RedisClientConfiguration, loop: EventLoop,
        now: @escaping @Sendable () -> UInt64 = { EventLoop.monotonicNanoseconds() },
        onEvent: @escaping @Sendable (Event) -> Void
    ) throws(RedisClientError) {
        try self.init(configuration: configuration, loop: loop, ownsLoop: false, now: now, onEvent: onEvent)
    }

    /// A pipeline on an event loop of its own (a thread named `redis-limits`), for tools and tests; stopped by
    /// ``shutdown()``.
    public convenience init(
        configuration: RedisClientConfiguration, onEvent: @escaping @Sendable (Event) -> Void
    ) throws(RedisClientError) {
        let loop: EventLoop
        do {
            loop = try EventLoop(name: "redis-limits", readBufferSize: 16 * 1024) { OPENSSL_thread_stop() }
        } catch {
            throw RedisClientError(.invalidConfiguration, "cannot start an event loop: " + error.reason)
        }
        do {
            try self.init(
                configuration: configuration, loop: loop, ownsLoop: true, now: { EventLoop.monotonicNanoseconds() },
                onEvent: onEvent)
        } catch {
            loop.stop()
            throw error
        }
    }

    private init(
        configuration: RedisClientConfiguration, loop: EventLoop, ownsLoop: Bool,
        now: @escaping @Sendable () -> UInt64, onEvent: @escaping @Sendable (Event) -> Void
    ) throws(RedisClientError) {
        self.configuration = configuration
        self.loop = loop
        self.ownsLoop = ownsLoop
        self.now = now
        self.onEvent = onEvent
        if configuration.useTLS {
            do {
                let context = try TLSClientContext(extraCAFile: configuration.caFile, alpn: [])
                tls = ClientStream.TLS(context: context, serverName: configuration.host)
            } catch {
                throw RedisClientError(.invalidConfiguration, error.reason)
            }
        } else {
            tls = nil
        }
        scriptDigest = Self.scriptDigest(of: configuration.script)
        machine = RedisPipelineMachine(
            configuration: Self.machineConfiguration(configuration, digest: Array(scriptDigest.utf8)),
            seed: UInt64.random(in: .min ... .max))
    }

    private static func machineConfiguration(
        _ configuration: RedisClientConfiguration, digest: [UInt8]
    ) -> RedisPipelineMachine<Completion>.Configuration {
        func formatted(_ arguments: [[UInt8]]) -> [UInt8] {
            var bytes: [UInt8] = []
            RedisCommand.append(arguments, to: &bytes)
            return bytes
        }
        var setUp: [RedisPipelineMachine<Completion>.SetUpCommand] = []
        if let password = configuration.password {
            var auth = [Array("AUTH".utf8)]
            if let username = configuration.username { auth.append(Array(username.utf8)) }
            auth.append(Array(password.utf8))
            setUp.append(.init(kind: .auth, bytes: formatted(auth)))
        }
        if configuration.database != 0 {
            setUp.append(
                .init(kind: .select, bytes: formatted(RedisCommand.bytes("SELECT", String(configuration.database)))))
        }
        let scriptLoad = formatted(RedisCommand.bytes("SCRIPT", "LOAD", configuration.script))
        setUp.append(.init(kind: .scriptLoad, bytes: scriptLoad))
        return .init(
            timeout: max(1_000_000, nanoseconds(configuration.timeout)),
            connectTimeout: max(1_000_000, nanoseconds(configuration.connectTimeout)), setUp: setUp,
            scriptLoad: scriptLoad, scriptDigest: digest)
    }

    /// Connects (from any thread); the connection is made on the loop.
    public func start() {
        loop.execute { [self] in startOnLoop() }
    }

    /// Waits (at most `timeout`, never on the loop's thread) until the first connection attempt has ended; true
    /// when connected.
    public func awaitFirstAttempt(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline && !firstAttemptDone.load(ordering: .acquiring) {
            usleep(2_000)
        }
        return isConnected
    }

    /// Closes the connection for good: requests in flight are answered `.unavailable`, later ones refused. Once
    /// this returns, no completion runs any more and none is held (callers that captured their owner in a
    /// completion are not kept alive by this pipeline). From any thread; called on the loop's own thread it is
    /// ``stopOnLoop()``. A loop made for the pipeline alone is stopped too (off its thread). Before a worker's
    /// loop stops: a loop that closes the connection under a running pipeline makes it report a loss.
    public func shutdown() {
        if loop.isCurrent {
            stopOnLoop()
            return
        }
        _ = try? loop.performAndWait { [self] in stopOnLoop() }
        if ownsLoop { loop.stop() }
    }

    /// ``shutdown()`` on the loop's thread (a worker's pipeline, closed while its loop goes on).
    public func stopOnLoop() {
        loop.preconditionCurrent()
        let failed = machine.stop()
        connected.store(false, ordering: .releasing)
        firstAttemptDone.store(true, ordering: .releasing)
        timer?.close()
        timer = nil
        armedDeadline = nil
        if let stream {
            self.stream = nil
            stream.reset()
        }
        let error = RedisClientError(.unavailable, "shutting down")
        for request in failed { request(.failure(error)) }
    }

    /// Connected and set up (requests are sent); readable from any thread.
    public var isConnected: Bool { connected.load(ordering: .acquiring) }

    /// A snapshot of the counters (from another thread: taken on the loop, waiting for it).
    public var currentStatistics: RedisPipelineStatistics {
        if loop.isCurrent { return statistics }
        return (try? loop.performAndWait { [self] in statistics }) ?? statistics
    }

    // MARK: Requests

    /// Runs the script with `keys` and `arguments` (and the tag after them). Returns false at once, without calling
    /// `completion`, when not connected; otherwise `completion` is called exactly once, on the loop's thread,
    /// within the timeout.
    public func evaluate(keys: [[UInt8]], arguments: [[UInt8]], completion: @escaping Completion) -> Bool {
        var parts: [[UInt8]] = [Array("EVALSHA".utf8), Array(scriptDigest.utf8), Array(String(keys.count).utf8)]
        parts.append(contentsOf: keys)
        parts.append(contentsOf: arguments)
        parts.append(RedisTag.bytes(0))
        var command: [UInt8] = []
        command.reserveCapacity(160)
        RedisCommand.append(parts, to: &command)
        return submit(command, completion: completion)
    }

    /// Prepares the script's call with keys of `keyLengths` bytes and `arguments`, for
    /// ``evaluate(_:writingKeys:completion:)``.
    public func prepare(keyLengths: [Int], arguments: [[UInt8]]) -> PreparedCall {
        Self.prepare(script: configuration.script, keyLengths: keyLengths, arguments: arguments)
    }

    /// ``prepare(keyLengths:arguments:)`` for `script`, once for every pipeline that runs it.
    public static func prepare(script: String, keyLengths: [Int], arguments: [[UInt8]]) -> PreparedCall {
        let scriptDigest = scriptDigest(of: script)
        // Formatted once per key with another filler byte in it: where the bytes differ is where the key is.
        func formatted(changing changed: Int?) -> [UInt8] {
            var parts: [[UInt8]] = [
                Array("EVALSHA".utf8), Array(scriptDigest.utf8), Array(String(keyLengths.count).utf8),
            ]
            for (index, length) in keyLengths.enumerated() {
                parts.append([UInt8](repeating: index == changed ? 0x31 : 0x30, count: length))
            }
            parts.append(contentsOf: arguments)
            parts.append(RedisTag.bytes(0))
            var bytes: [UInt8] = []
            RedisCommand.append(parts, to: &bytes)
            return bytes
        }
        let base = formatted(changing: nil)
        let ranges = keyLengths.indices.map { index -> Range<Int> in
            let other = formatted(changing: index)
            let differs = base.indices.filter { base[$0] != other[$0] }
            return differs.first!..<differs.last! + 1
        }
        precondition(zip(ranges, keyLengths).allSatisfy { $0.count == $1 })
        return PreparedCall(template: base, keyRanges: ranges, scriptDigest: scriptDigest)
    }

    /// ``evaluate(keys:arguments:completion:)`` with a prepared call, its keys written by `writingKeys` (given each
    /// key's index and its bytes, of the prepared length) straight into the command.
    public func evaluate(
        _ call: PreparedCall, writingKeys: (Int, UnsafeMutableRawBufferPointer) -> Void,
        completion: @escaping Completion
    ) -> Bool {
        assert(call.scriptDigest == scriptDigest, "a call prepared for another script")
        var command = call.template
        command.withUnsafeMutableBytes { bytes in
            for (index, range) in call.keyRanges.enumerated() {
                writingKeys(index, UnsafeMutableRawBufferPointer(rebasing: bytes[range]))
            }
        }
        return submit(command, completion: completion)
    }

    /// ``evaluate(_:writingKeys:completion:)`` with the keys given whole (each of its prepared length).
    public func evaluate(_ call: PreparedCall, keys: [[UInt8]], completion: @escaping Completion) -> Bool {
        precondition(keys.map(\.count) == call.keyRanges.map(\.count), "the keys' lengths are the prepared ones")
        return evaluate(
            call, writingKeys: { index, target in keys[index].withUnsafeBytes(target.copyMemory(from:)) },
            completion: completion)
    }

    /// Sends `command` (whose last argument is a 16-byte tag placeholder) from this thread or, hopping, from another.
    private func submit(_ command: [UInt8], completion: @escaping Completion) -> Bool {
        if loop.isCurrent { return submitOnLoop(command, completion: completion) }
        guard connected.load(ordering: .acquiring) else { return false }
        let accepted = loop.execute { [self] in
            if !submitOnLoop(command, completion: completion) {
                completion(.failure(RedisClientError(.unavailable, "not connected")))
            }
        }
        return accepted
    }

    private func submitOnLoop(_ command: consuming [UInt8], completion: @escaping Completion) -> Bool {
        guard machine.isReady else { return false }
        let tag = machine.makeTag()
        command.withUnsafeMutableBytes { bytes in
            // The tag is the last bulk string: 16 bytes before the final CRLF.
            let end = bytes.count - 2
            RedisTag.write(tag, to: UnsafeMutableRawBufferPointer(rebasing: bytes[(end - RedisTag.length)..<end]))
        }
        switch machine.submit(command, tag: tag, request: completion, now: now()) {
        case .refused: return false
        case .flush: scheduleFlush()
        case .deferred: break
        }
        armTimer()
        return true
    }

    // MARK: Connection

    private func startOnLoop() {
        guard !started, !machine.isStopped else { return }
        started = true
        timer = LoopTimer(on: loop) { [weak self] in self?.timerFired() }
        if machine.start(now: now()) { connect() }
        armTimer()
    }

    private func connect() {
        reader = RedisReplyReader()
        stream = ClientStream.connect(
            on: loop, host: configuration.host, port: configuration.port, tls: tls, delegate: self)
    }

    private func timerFired() {
        armedDeadline = nil
        switch machine.timerFired(now: now()) {
        case .none: break
        case .connect: connect()
        case .lost(let loss): lost(loss)
        }
        armTimer()
    }

    /// Keeps the timer at (or before) the machine's next deadline. A timer that fires early is harmless: the
    /// machine finds nothing due and the timer is armed again.
    private func armTimer() {
        guard let deadline = machine.nextDeadline, let timer else { return }
        if let armed = armedDeadline, armed <= deadline { return }
        armedDeadline = deadline
        let current = now()
        // Rounded up: the loop's clock counts whole milliseconds.
        timer.schedule(afterMilliseconds: deadline > current ? (deadline - current + 999_999) / 1_000_000 : 0)
    }

    private func flush() {
        guard let stream else { return }
        machine.flush { output in
            statistics.writes += 1
            stream.write(output)
        }
    }

    /// Writes at the start of the loop's next turn, once for every request submitted in this one: a turn that
    /// reads many clients' requests sends all their calls in one write (the first request's own write used to go
    /// at once, alone).
    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.enqueue { [self] in
            flushScheduled = false
            flush()
        }
    }

    /// A connection ended (the machine has answered its requests' failure): close it, answer them, report.
    private func lost(_ loss: RedisPipelineMachine<Completion>.Loss) {
        if let stream {
            self.stream = nil
            stream.reset()
        }
        connected.store(false, ordering: .releasing)
        firstAttemptDone.store(true, ordering: .releasing)
        statistics.errors[loss.error.code.name, default: 0] += 1
        for request in loss.failed { request(.failure(loss.error)) }
        if let event = loss.event { onEvent(event) }
        armTimer()
    }

    private func replies(_ bytes: UnsafeRawBufferPointer) {
        do throws(RedisClientError) {
            try reader.feed(bytes)
        } catch {
            if let loss = machine.failed(error, now: now()) { lost(loss) }
            return
        }
        let time = now()
        while stream != nil {
            let reply: RedisPipelineReply
            do throws(RedisClientError) {
                guard let next = try reader.nextParsed() else { break }
                reply = next
            } catch {
                if let loss = machine.failed(error, now: time) { lost(loss) }
                return
            }
            switch machine.received(reply, now: time) {
            case .none: break
            case .answer(let request, let result, let latency):
                if case .failure(let error) = result {
                    statistics.errors[error.code.name, default: 0] += 1
                } else {
                    statistics.record(latency: Double(latency) / 1e9)
                }
                request(result)
            case .reloading:
                statistics.scriptReloads += 1
            case .ready(let event):
                connected.store(true, ordering: .releasing)
                firstAttemptDone.store(true, ordering: .releasing)
                if let event { onEvent(event) }
            case .lost(let loss):
                lost(loss)
                return
            }
        }
        machine.endOfRead()
        flush()
        armTimer()
    }

    // MARK: Helpers

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }

    /// Checks what a pipeline needs before one is made (a `rediss://` CA file that loads), without connecting.
    public static func validate(_ configuration: RedisClientConfiguration) throws(RedisClientError) {
        guard configuration.useTLS else { return }
        do {
            _ = try TLSClientContext(extraCAFile: configuration.caFile, alpn: [])
        } catch {
            throw RedisClientError(.invalidConfiguration, error.reason)
        }
    }

    /// A script's SHA-1 in lowercase hex, as `EVALSHA` names it and `SCRIPT LOAD` answers it.
    public static func scriptDigest(of script: String) -> String {
        sha1Hex(Array(script.utf8))
    }

    static func sha1Hex(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = EVP_Digest(bytes, bytes.count, &digest, &length, EVP_sha1(), nil)
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        return String(
            decoding: digest.prefix(Int(length)).flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0xF)]] }, as: UTF8.self)
    }
}

extension RedisPipeline: ClientStreamDelegate {
    public func streamDidConnect(_ stream: ClientStream) {
        guard stream === self.stream else { return }
        statistics.connectionsOpened += 1
        machine.connected(now: now())
        flush()
    }

    public func stream(_ stream: ClientStream, didRead bytes: UnsafeRawBufferPointer) {
        guard stream === self.stream else { return }
        replies(bytes)
    }

    public func stream(_ stream: ClientStream, didFail failure: ClientStreamFailure) {
        guard stream === self.stream else { return }
        self.stream = nil
        if let loss = machine.failed(Self.error(failure), now: now()) { lost(loss) }
    }

    /// The stream's failure in the pipeline's terms.
    static func error(_ failure: ClientStreamFailure) -> RedisClientError {
        switch failure.kind {
        case .resolve: RedisClientError(.refused, "cannot resolve the host: \(failure.reason)")
        case .connect: RedisClientError(.refused, "cannot connect: \(failure.reason)")
        case .certificate: RedisClientError(.tls, "the server's certificate was not accepted: \(failure.reason)")
        case .handshake: RedisClientError(.tls, "the TLS handshake failed: \(failure.reason)")
        case .closedByPeer: RedisClientError(.closed, "the server closed the connection")
        case .reset: RedisClientError(.closed, "the connection broke: \(failure.reason)")
        case .tls: RedisClientError(.closed, "the TLS connection broke: \(failure.reason)")
        }
    }
}
