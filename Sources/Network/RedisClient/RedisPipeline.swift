import Dispatch
import EventLoops
import Glibc
import MonotonicTime
import OutboundConnections
import RelayCrypto
import Synchronization
import TLS

/// A pipelined connection to Redis that runs one Lua script, on one event loop: the shell around
/// ``RedisPipelineMachine``. It owns the stream (``OutboundConnections/ClientStream``: plain for `redis://`, TLS for
/// `rediss://`), hiredis's reply reader, and one ``EventLoops/LoopTimer`` for every deadline (a request's
/// ``RedisClientConfiguration/timeout``, the connect timeout, the next reconnection); it starts no thread.
///
/// Requests written together with the same arguments go as one call of the script, up to 32 to a call (Redis runs
/// the script once for all of them). A call's `KEYS` are its requests' keys in order; its `ARGV` the requests'
/// arguments, then how many keys each request has (one digit each: `"2"`, `"21"`, ...), then the call's tag (a
/// sequence number). The script must return the tag first and then each request's answer, one or two integers:
/// `{tag, {integer[, integer]}, ...}`. A reply that answers some other call is caught, not handed to the wrong
/// caller.
///
/// While not connected, ``evaluate(keys:arguments:completion:)`` refuses at once (the caller decides without the
/// store); the pipeline reconnects with a growing delay (50 ms doubling to 5 s, with jitter), resolving the host name
/// anew each time, and reports each loss and return once through the event handler, with the server's address.
///
/// With ``RedisClientConfiguration/sentinel``, each connection is preceded by asking the sentinels where the primary
/// is, and a sentinel's `+switch-master` makes the pipeline leave the server: the machine decides (it composes a
/// ``SentinelMachine``); the shell holds the connection to a sentinel (``SentinelLocator``) and does what it says.
///
/// Threading: made and used on its loop's thread, requests cost no lock and no thread crossing, and completions
/// and events run on that thread. Called from another thread, a request hops to the loop (`loop.execute`).
// @unchecked Sendable: `machine`, `stream`, `reader`, `timer`, `statistics`, `locator` and `started` are used
// only on `loop`'s thread (every path to them runs there: checked, or reached through `loop.execute` or
// `performAndWait`); the rest is immutable or atomic.
public final class RedisPipeline: @unchecked Sendable {
    public typealias Event = RedisPipelineEvent

    /// The answer to one request: the script's integers after the tag, or why there are none.
    public typealias Completion = @Sendable (Result<RedisScriptAnswer, RedisClientError>) -> Void

    /// One call of the script prepared once (``RedisScriptCall``).
    public typealias PreparedCall = RedisScriptCall

    /// A request until its call is answered: its command alone (its keys written in; the tag is written when it
    /// leaves), and the call it was made from (where its keys are, its arguments).
    struct Request: RedisScriptCallMember {
        var command: [UInt8]
        var call: PreparedCall
        var completion: Completion
    }

    public let loop: EventLoop
    /// The script's SHA-1 in hex, as EVALSHA names it.
    public let scriptDigest: String

    /// The script and the TLS settings (the rest is the machine's).
    private let configuration: RedisClientConfiguration
    /// The TLS context for the server (and the sentinels); nil: plain TCP.
    private let tlsContext: TLSClientContext?
    private let onEvent: @Sendable (Event, _ server: String) -> Void
    /// The loop was made for this pipeline alone (stopped with it).
    private let ownsLoop: Bool
    private let connected = Atomic<Bool>(false)
    private let firstAttemptDone = Atomic<Bool>(false)
    /// Signalled when the first attempt ends, for ``awaitFirstAttempt(timeout:)``; each waiter passes it on.
    private let firstAttempt = DispatchSemaphore(value: 0)

    // Loop-thread state.
    private var machine: RedisPipelineMachine<Request>
    private var stream: ClientStream?
    private var reader = RedisReplyReader()
    private var timer: LoopTimer?
    private var statistics = RedisPipelineStatistics()
    private var started = false
    /// The connection to a sentinel (with a sentinel configuration).
    private var locator: SentinelLocator?
    /// A write of the output is due at the start of the loop's next turn (``scheduleFlush()``).
    private var flushScheduled = false

    /// A pipeline on `loop` (a worker's): nothing happens until ``start()``.
    public convenience init(
        configuration: RedisClientConfiguration, loop: EventLoop, onEvent: @escaping @Sendable (Event) -> Void
    ) throws(RedisClientError) {
        try self.init(
            configuration: configuration, loop: loop, ownsLoop: false, onEvent: { event, _ in onEvent(event) })
    }

    /// A pipeline on `loop` whose events carry the address of the server they concern (`host:port`: the one
    /// connected to, left or lost; empty when none was reached).
    public convenience init(
        configuration: RedisClientConfiguration, loop: EventLoop,
        onServerEvent: @escaping @Sendable (Event, _ server: String) -> Void
    ) throws(RedisClientError) {
        try self.init(configuration: configuration, loop: loop, ownsLoop: false, onEvent: onServerEvent)
    }

    /// A pipeline on an event loop of its own (a thread named `redis-limits`), for tools and tests; stopped by
    /// ``shutdown()``.
    public convenience init(
        configuration: RedisClientConfiguration, onEvent: @escaping @Sendable (Event) -> Void
    ) throws(RedisClientError) {
        let loop: EventLoop
        do {
            loop = try EventLoop(name: "redis-limits", readBufferSize: 16 * 1024) { OpenSSLThread.stop() }
        } catch {
            throw RedisClientError(.invalidConfiguration, "cannot start an event loop: " + error.reason)
        }
        do {
            try self.init(
                configuration: configuration, loop: loop, ownsLoop: true, onEvent: { event, _ in onEvent(event) })
        } catch {
            loop.stop()
            throw error
        }
    }

    private init(
        configuration: RedisClientConfiguration, loop: EventLoop, ownsLoop: Bool,
        onEvent: @escaping @Sendable (Event, String) -> Void
    ) throws(RedisClientError) {
        self.configuration = configuration
        self.loop = loop
        self.ownsLoop = ownsLoop
        self.onEvent = onEvent
        if configuration.useTLS {
            do {
                tlsContext = try TLSClientContext(extraCAFile: configuration.caFile, alpn: [])
            } catch {
                throw RedisClientError(.invalidConfiguration, error.reason)
            }
        } else {
            tlsContext = nil
        }
        scriptDigest = Self.scriptDigest(of: configuration.script)
        machine = RedisPipelineMachine(
            configuration: .init(configuration, digest: Array(scriptDigest.utf8), format: Self.formatted),
            seed: UInt64.random(in: .min ... .max))
    }

    /// One command's bytes, formatted by hiredis.
    private static func formatted(_ arguments: [[UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = []
        RedisCommand.append(arguments, to: &bytes)
        return bytes
    }

    /// Connects (from any thread); the connection is made on the loop.
    public func start() {
        loop.execute { [self] in startOnLoop() }
    }

    /// Waits (at most `timeout`, never on the loop's thread) until the first connection attempt has ended; true
    /// when connected.
    public func awaitFirstAttempt(timeout: Duration) -> Bool {
        if !firstAttemptDone.load(ordering: .acquiring),
            firstAttempt.wait(timeout: .now() + .nanoseconds(Int(timeout.nanoseconds))) == .success
        {
            firstAttempt.signal()
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
        firstAttemptEnded()
        timer?.close()
        timer = nil
        locator?.close()
        locator = nil
        let closing = stream
        stream = nil
        closing?.reset()
        let error = RedisClientError(.unavailable, "shutting down")
        for request in failed { request.completion(.failure(error)) }
    }

    /// The first attempt has ended (connected, failed, or stopped) and its event was reported: wakes whoever waits
    /// for it, once.
    private func firstAttemptEnded() {
        if !firstAttemptDone.exchange(true, ordering: .acquiringAndReleasing) { firstAttempt.signal() }
    }

    /// Leaves the server now (from any thread) and connects again after the reconnection delay, as after a loss
    /// for `error`: another pipeline of the same store found the server no longer the primary, and this one, which
    /// may have had no call since, must not stay on it.
    public func leaveServer(_ error: RedisClientError) {
        loop.execute { [self] in run(machine.leave(error, now: EventLoop.monotonicNow())) }
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
    /// within the timeout. A request has one to nine keys.
    public func evaluate(keys: [[UInt8]], arguments: [[UInt8]], completion: @escaping Completion) -> Bool {
        evaluate(prepare(keyLengths: keys.map(\.count), arguments: arguments), keys: keys, completion: completion)
    }

    /// Prepares the script's call with keys of `keyLengths` bytes and `arguments`, for
    /// ``evaluate(_:writingKeys:completion:)``.
    public func prepare(keyLengths: [Int], arguments: [[UInt8]]) -> PreparedCall {
        Self.prepare(script: configuration.script, keyLengths: keyLengths, arguments: arguments)
    }

    /// ``prepare(keyLengths:arguments:)`` for `script`, once for every pipeline that runs it.
    public static func prepare(script: String, keyLengths: [Int], arguments: [[UInt8]]) -> PreparedCall {
        RedisScriptCall(script: script, keyLengths: keyLengths, arguments: arguments)
    }

    /// ``evaluate(keys:arguments:completion:)`` with a prepared call, its keys written by `writingKeys` (given each
    /// key's index and its bytes, of the prepared length) straight into the command.
    public func evaluate(
        _ call: PreparedCall, writingKeys: (Int, UnsafeMutableRawBufferPointer) -> Void,
        completion: @escaping Completion
    ) -> Bool {
        assert(call.scriptDigest == scriptDigest, "a call prepared for another script")
        let command = call.command(writingKeys: writingKeys)
        return submit(Request(command: command, call: call, completion: completion))
    }

    /// ``evaluate(_:writingKeys:completion:)`` with the keys given whole (each of its prepared length).
    public func evaluate(_ call: PreparedCall, keys: [[UInt8]], completion: @escaping Completion) -> Bool {
        precondition(keys.map(\.count) == call.keyRanges.map(\.count), "the keys' lengths are the prepared ones")
        return evaluate(
            call, writingKeys: { index, target in keys[index].withUnsafeBytes(target.copyMemory(from:)) },
            completion: completion)
    }

    /// Sends `request` from this thread or, hopping, from another (only while connected: not connected, the caller
    /// decides at once).
    private func submit(_ request: Request) -> Bool {
        guard !loop.isCurrent else { return submitOnLoop(request, hopped: false) }
        return connected.load(ordering: .acquiring) && loop.execute { [self] in submitOnLoop(request, hopped: true) }
    }

    @discardableResult
    private func submitOnLoop(_ request: Request, hopped: Bool) -> Bool {
        switch machine.submit(request, now: EventLoop.monotonicNow(), hopped: hopped) {
        case .refused: return false
        case .answer(let error): request.completion(.failure(error))
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
        locator = configuration.sentinel.map { _ in SentinelLocator(pipeline: self, loop: loop, tls: tlsContext) }
        run(machine.begin(now: EventLoop.monotonicNow()))
    }

    /// Does what the machine says about the connections: a loss first, then the sentinel's connection, then a new
    /// connection to a server.
    private func run(_ step: RedisPipelineMachine<Request>.Step) {
        if let loss = step.loss { lost(loss) }
        switch step.sentinel {
        case .none: break
        case .connect(let node): locator?.connect(to: node)
        case .write:
            locator?.write(machine.sentinelOutput)
            machine.sentinelFlushed()
        case .close: locator?.close()
        }
        if let node = step.connect { connect(to: node) }
        armTimer()
    }

    private func connect(to node: SentinelMachine.Node) {
        reader = RedisReplyReader()
        stream = ClientStream.connect(
            on: loop, host: node.host, port: node.port,
            tls: tlsContext.map { ClientStream.TLS(context: $0, serverName: node.host) }, delegate: self)
    }

    private func timerFired() {
        run(machine.timer(now: EventLoop.monotonicNow()))
    }

    // MARK: The sentinel's connection (``SentinelLocator``)

    func sentinelConnected() {
        run(machine.sentinelConnected(now: EventLoop.monotonicNow()))
    }

    func sentinelReceived(_ reply: RedisReply) {
        run(machine.sentinelReceived(reply, now: EventLoop.monotonicNow()))
    }

    func sentinelFailed(_ reason: String) {
        run(machine.sentinelFailed(reason, now: EventLoop.monotonicNow()))
    }

    /// Keeps the timer at (or before) the machine's next deadline. A timer that fires early is harmless: the
    /// machine finds nothing due and the timer is armed again.
    private func armTimer() {
        guard let deadline = machine.nextDeadline, let timer else { return }
        timer.schedule(noLaterThan: deadline)
    }

    private func flush() {
        guard let stream else { return }
        machine.flush(format: { RedisScriptCall.command(joining: $0, tag: $1) }) { output in
            statistics.writes += 1
            stream.write(output)
        }
    }

    /// Writes at the start of the loop's next turn, once for every request submitted in this one: a turn that
    /// reads many clients' requests sends all their calls in one write, rather than the first request's alone and
    /// the rest after it.
    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.enqueue { [self] in
            flushScheduled = false
            flush()
        }
    }

    /// A connection ended (the machine has answered its requests' failure): close it, answer them, report.
    private func lost(_ loss: RedisPipelineMachine<Request>.Loss) {
        let closing = stream
        stream = nil
        closing?.reset()
        if loss.closeSentinel { locator?.close() }
        connected.store(false, ordering: .releasing)
        statistics.errors[loss.error.code.name, default: 0] += 1
        for request in loss.failed { request.completion(.failure(loss.error)) }
        if let event = loss.event { onEvent(event, loss.server?.description ?? "") }
        // After the event: whoever waited for the first attempt finds it reported.
        firstAttemptEnded()
        armTimer()
    }

    /// The server of the events (`host:port`); empty when none was reached.
    private var server: String { machine.server?.description ?? "" }

    private func replies(_ bytes: UnsafeRawBufferPointer) {
        do throws(RedisClientError) {
            try reader.feed(bytes)
        } catch {
            run(machine.streamFailed(error, now: EventLoop.monotonicNow()))
            return
        }
        let time = EventLoop.monotonicNow()
        while stream != nil {
            let reply: RedisPipelineReply
            do throws(RedisClientError) {
                guard let next = try reader.nextParsed() else { break }
                reply = next
            } catch {
                run(machine.streamFailed(error, now: time))
                return
            }
            switch machine.received(reply, now: time) {
            case .none: break
            case .answers(let answers, let event):
                for answer in answers {
                    if case .failure(let error) = answer.result {
                        statistics.errors[error.code.name, default: 0] += 1
                    } else {
                        statistics.record(latency: Double(answer.latency) / 1e9)
                    }
                    answer.request.completion(answer.result)
                }
                if let event { onEvent(event, server) }
            case .reloading:
                statistics.scriptReloads += 1
            case .ready(let event):
                connected.store(true, ordering: .releasing)
                if let event { onEvent(event, server) }
                firstAttemptEnded()
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
        let hex: [UInt8] = Array("0123456789abcdef".utf8)
        return String(
            decoding: SHA1.hash(bytes).flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0xF)]] }, as: UTF8.self)
    }
}

extension RedisPipeline: ClientStreamDelegate {
    public func streamDidConnect(_ stream: ClientStream) {
        guard stream === self.stream else { return }
        statistics.connectionsOpened += 1
        machine.connected(now: EventLoop.monotonicNow())
        flush()
    }

    public func stream(_ stream: ClientStream, didRead bytes: UnsafeRawBufferPointer) {
        guard stream === self.stream else { return }
        replies(bytes)
    }

    public func stream(_ stream: ClientStream, didFail failure: ClientStreamFailure) {
        guard stream === self.stream else { return }
        self.stream = nil
        run(machine.streamFailed(Self.error(failure), now: EventLoop.monotonicNow()))
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
