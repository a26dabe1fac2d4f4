/// Why a request got no answer (or a client could not be created).
///
/// Equality is by ``code`` only. The ``reason`` is for humans and never contains request
/// headers, bodies or paths.
public struct HTTP2ClientError: Error, Equatable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The request's deadline passed before an answer arrived.
        public static let timeout = Code("timeout")
        /// No TCP connection could be made (unresolvable host, refused, connect timeout).
        public static let connectFailed = Code("connectFailed")
        /// The TLS handshake failed (certificate not trusted, protocol mismatch).
        public static let tls = Code("tls")
        /// The connection broke (reset, closed, GOAWAY) before the answer arrived.
        public static let connectionLost = Code("connectionLost")
        /// The server refused the stream (REFUSED_STREAM, or above a GOAWAY's last stream id)
        /// and it could not be retried.
        public static let refused = Code("refused")
        /// The server broke the HTTP/2 protocol, reset the stream, or sent an unusable answer.
        public static let protocolError = Code("protocolError")
        /// The client was shut down.
        public static let shutdown = Code("shutdown")
        /// The request itself is malformed (bad path, method or header); it was not sent.
        public static let invalidRequest = Code("invalidRequest")
        /// The configuration is unusable (thrown by `HTTP2Client.init`).
        public static let invalidConfiguration = Code("invalidConfiguration")
    }

    /// The kind of failure.
    public let code: Code
    /// A human explanation.
    public let reason: String
    /// `false` when the server certainly did not process the request (connection failed before
    /// it was sent, refused stream, stream above a GOAWAY's last stream id); `true` when it may have.
    public let mayHaveBeenProcessed: Bool

    /// Creates an error.
    public init(_ code: Code, _ reason: String, mayHaveBeenProcessed: Bool) {
        self.code = code
        self.reason = reason
        self.mayHaveBeenProcessed = mayHaveBeenProcessed
    }

    public static func == (lhs: HTTP2ClientError, rhs: HTTP2ClientError) -> Bool { lhs.code == rhs.code }

    public var description: String {
        "HTTP2ClientError.\(code): \(reason)" + (mayHaveBeenProcessed ? " (may have been processed)" : "")
    }
}
