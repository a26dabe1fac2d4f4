import EventLoops
import Glibc
import HTTP2Sessions
import MonotonicTime
import TLS

/// An HTTP/2-over-TLS client for one origin, on libnghttp2 and OpenSSL, driven by one event loop.
///
/// Requests are multiplexed over at most `maxConnections` long-lived connections. Every connection
/// lives on the client's ``EventLoops/EventLoop`` (TLS over a libuv TCP connection, deadlines
/// and PING on the loop's timers): the client has no thread of its own beyond that loop's, and none
/// at all when it is given a loop. `send` hands a request to the least-loaded connection with room (a
/// new connection carries one request at a time until an answer proves it, see `provesConnection`). A
/// connection that got GOAWAY, refused a stream, broke, missed a PING or let a request pass its
/// deadline takes no new requests and is replaced. A request the server certainly did not process is
/// sent again on another connection while its deadline allows, at most three sends in all; one it may
/// have processed is never sent again (the rules are in PoolStateMachine.swift).
///
/// The client knows nothing of the requests' meaning: the caller builds headers and reads statuses.
public final class HTTP2Client: Sendable {
    private let core: ClientCore
    /// The loop was made by this client (and is stopped by `shutdown`).
    private let ownsLoop: Bool

    /// Creates a client with an event loop of its own (one thread, named `h2-client`, stopped by
    /// `shutdown()`); connections open on demand. Completions run on that loop's thread.
    /// - Throws: `.invalidConfiguration` for an origin that is not `https://host[:port]`, a
    ///   limit below 1, or an unreadable CA file (or when the loop's thread cannot start).
    public init(configuration: HTTP2ClientConfiguration) throws(HTTP2ClientError) {
        let settings = try ClientSettings(configuration: configuration)
        let loop: EventLoop
        do {
            // OpenSSL's per-thread state is freed as the loop's thread ends, before `shutdown()` returns.
            loop = try EventLoop(name: "h2-client", onThreadExit: { OpenSSLThread.stop() })
        } catch {
            throw HTTP2ClientError(
                .invalidConfiguration, "cannot start the client's event loop: \(error.reason)",
                mayHaveBeenProcessed: false)
        }
        core = ClientCore(settings: settings, maxConnections: configuration.maxConnections, loop: loop)
        ownsLoop = true
    }

    /// Creates a client whose connections live on `loop` (a relay worker's): `send` called on that loop's
    /// thread goes straight to the connections, and completions run on it, in the turn that read the
    /// answer. `maxConnections` is this client's own cap. The client starts no thread; stop it with
    /// `shutdown()` before the loop stops.
    /// - Throws: `.invalidConfiguration`, as ``init(configuration:)``.
    public init(configuration: HTTP2ClientConfiguration, loop: EventLoop) throws(HTTP2ClientError) {
        let settings = try ClientSettings(configuration: configuration)
        core = ClientCore(settings: settings, maxConnections: configuration.maxConnections, loop: loop)
        ownsLoop = false
    }

    deinit { shutdown() }

    /// Checks a configuration as the initializers do (origin, limits, CA file), without making a client, a
    /// loop or a thread (for a dry run such as `duo-relay check`).
    /// - Throws: `.invalidConfiguration`, as ``init(configuration:)``.
    public static func check(_ configuration: HTTP2ClientConfiguration) throws(HTTP2ClientError) {
        _ = try ClientSettings(configuration: configuration)
    }

    /// The loop the client's connections live on (its own, or the one it was given).
    public var loop: EventLoop { core.loop }

    /// Sends a request; `completion` is called exactly once, with the answer (any HTTP status)
    /// or the reason there is none.
    ///
    /// Called on the client's loop thread, the request goes straight in; from another thread it is handed
    /// to the loop (`EventLoop.execute`). The completion runs on the loop's thread and must return quickly;
    /// it may call `send` again. A request that is malformed, or sent after `shutdown()`, fails at once on
    /// the caller's thread.
    public func send(
        _ request: HTTP2Request, completion: @escaping @Sendable (Result<HTTP2Response, HTTP2ClientError>) -> Void
    ) {
        if let problem = Self.problem(in: request) {
            completion(.failure(HTTP2ClientError(.invalidRequest, problem, mayHaveBeenProcessed: false)))
            return
        }
        guard !core.isShutDown else {
            completion(.failure(StreamOutcome.shutdown(written: false).error!))
            return
        }
        let deadline = EventLoop.monotonicNow() + request.timeout.nanoseconds
        let pending = PendingRequest(request: request, deadline: deadline, completion: completion)
        let core = self.core
        core.accepted()
        if core.loop.isCurrent {
            core.submit(pending)
        } else if !core.loop.execute({ core.submit(pending) }) {
            core.rejected(pending)
        }
    }

    /// Sends a request and waits for its answer (any HTTP status) or the reason there is none.
    public func send(_ request: HTTP2Request) async -> Result<HTTP2Response, HTTP2ClientError> {
        await withCheckedContinuation { continuation in
            send(request) { continuation.resume(returning: $0) }
        }
    }

    /// The client's counters now (readable from any thread).
    public var statistics: HTTP2ClientStatistics { core.statistics }

    /// Fails queued and in-flight requests with `.shutdown` and closes the connections; a client with a
    /// loop of its own then stops it. Later requests fail with `.shutdown` at once. From any thread
    /// (another thread waits until it is done); calling it again does nothing.
    public func shutdown() {
        let core = self.core
        if core.loop.isCurrent {
            core.shutDown()
            if ownsLoop { core.loop.requestStop() }
            return
        }
        // A loop that has stopped took no work: its handles are closed, and nothing is left to fail.
        try? core.loop.performAndWait { core.shutDown() }
        if ownsLoop { core.loop.stop() }
    }

    /// What makes a request unsendable, if anything (never quoting the request's data).
    static func problem(in request: HTTP2Request) -> String? {
        guard isToken(request.method) else { return "the method is not a token" }
        let pathIsValid = request.path.withUTF8Bytes { path in
            path.first == UInt8(ascii: "/") && !path.contains { $0 <= 0x20 || $0 >= 0x7F }
        }
        guard pathIsValid else { return "the path must start with / and hold visible ASCII only" }
        // By index: `for (name, value) in` copies each field (a retain and a release per string).
        for index in request.headers.indices {
            guard isToken(request.headers[index].name) else { return "a header name is not a token" }
            // memchr: a value such as the provider token is hundreds of bytes, checked on every request.
            let valueIsValid = request.headers[index].value.withUTF8Bytes { bytes in
                guard let base = bytes.baseAddress else { return true }
                return memchr(base, 0, bytes.count) == nil && memchr(base, 0x0A, bytes.count) == nil
                    && memchr(base, 0x0D, bytes.count) == nil
            }
            guard valueIsValid else { return "a header value holds CR, LF or NUL" }
        }
        guard request.timeout > .zero else { return "the timeout must be positive" }
        return nil
    }

    /// RFC 9110 `tchar`, by byte.
    private static let tokenBytes: [Bool] = (0..<256).map { byte in
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            || "!#$%&'*+-.^_`|~".utf8.contains(UInt8(byte))
    }

    private static func isToken(_ text: String) -> Bool {
        text.withUTF8Bytes { bytes in
            !bytes.isEmpty && tokenBytes.withUnsafeBufferPointer { table in !bytes.contains { !table[Int($0)] } }
        }
    }

}
