/// An HTTP/2-over-TLS client for one origin, on libnghttp2 and OpenSSL.
///
/// Requests are multiplexed over at most `maxConnections` long-lived connections. Each
/// connection is one TCP connection with its nghttp2 session, driven by a thread of its own;
/// `send` hands a request to the least-loaded connection with room (a new connection carries one
/// request at a time until an answer proves it, see `provesConnection`). A connection that got
/// GOAWAY, refused a stream, broke, missed a PING or let a request pass its deadline takes no new
/// requests and is replaced. A request the server certainly did not process is sent again on
/// another connection while its deadline allows, at most three sends in all; one it may have
/// processed is never sent again (the rules are in PoolStateMachine.swift).
///
/// The client knows nothing of the requests' meaning: the caller builds headers and reads statuses.
public final class HTTP2Client: Sendable {
    private let core: ClientCore

    /// Creates a client; connections open on demand.
    /// - Throws: `.invalidConfiguration` for an origin that is not `https://host[:port]`, a
    ///   limit below 1, or an unreadable CA file.
    public init(configuration: HTTP2ClientConfiguration) throws(HTTP2ClientError) {
        let settings = try ClientSettings(configuration: configuration)
        core = ClientCore(settings: settings, maxConnections: configuration.maxConnections)
    }

    deinit { core.shutDown() }

    /// Sends a request; `completion` is called exactly once, with the answer (any HTTP status)
    /// or the reason there is none.
    ///
    /// The completion runs on one of the client's threads and must return quickly. A request
    /// that is malformed, or sent after `shutdown()`, fails at once on the caller's thread.
    public func send(
        _ request: HTTP2Request, completion: @escaping @Sendable (Result<HTTP2Response, HTTP2ClientError>) -> Void
    ) {
        if let problem = Self.problem(in: request) {
            completion(.failure(HTTP2ClientError(.invalidRequest, problem, mayHaveBeenProcessed: false)))
            return
        }
        let deadline = ContinuousClock.now + request.timeout
        core.submit(PendingRequest(request: request, deadline: deadline, completion: completion))
    }

    /// Sends a request and waits for its answer (any HTTP status) or the reason there is none.
    public func send(_ request: HTTP2Request) async -> Result<HTTP2Response, HTTP2ClientError> {
        await withCheckedContinuation { continuation in
            send(request) { continuation.resume(returning: $0) }
        }
    }

    /// The client's counters now.
    public var statistics: HTTP2ClientStatistics { core.statistics }

    /// Fails queued and in-flight requests with `.shutdown`, ends the client's threads and closes
    /// its connections. Later requests fail with `.shutdown` at once. Calling it again does nothing.
    public func shutdown() { core.shutDown() }

    /// What makes a request unsendable, if anything (never quoting the request's data).
    static func problem(in request: HTTP2Request) -> String? {
        guard isToken(request.method) else { return "the method is not a token" }
        let pathIsValid = request.path.withUTF8Bytes { path in
            path.first == UInt8(ascii: "/") && !path.contains { $0 <= 0x20 || $0 >= 0x7F }
        }
        guard pathIsValid else { return "the path must start with / and hold visible ASCII only" }
        for (name, value) in request.headers {
            guard isToken(name) else { return "a header name is not a token" }
            let valueIsValid = value.withUTF8Bytes { bytes in
                !bytes.contains { $0 == 0 || $0 == 0x0A || $0 == 0x0D }
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
