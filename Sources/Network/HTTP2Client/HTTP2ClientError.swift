import ErrorCodes

/// Why a request got no answer (or a client could not be created): the project's one error shape
/// (``ErrorCodes/CodedError``), with whether the server may have processed the request.
///
/// Equality is by ``code`` only. The ``reason`` is for humans and never contains request
/// headers, bodies or paths.
public struct HTTP2ClientError: CodedError, Sendable {
    /// The kind of failure (the static members of `ErrorCode` below).
    public typealias Code = ErrorCode<HTTP2ClientError>

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

    public var description: String {
        "HTTP2ClientError.\(code): \(reason)" + (mayHaveBeenProcessed ? " (may have been processed)" : "")
    }
}

extension ErrorCode where Domain == HTTP2ClientError {
    /// The request's deadline passed before an answer arrived.
    public static var timeout: Self { Self("timeout") }
    /// No TCP connection could be made (unresolvable host, refused, connect timeout).
    public static var connectFailed: Self { Self("connectFailed") }
    /// The TLS handshake failed (certificate not trusted, protocol mismatch).
    public static var tls: Self { Self("tls") }
    /// The connection broke (reset, closed, GOAWAY) before the answer arrived.
    public static var connectionLost: Self { Self("connectionLost") }
    /// The server refused the stream (REFUSED_STREAM, or above a GOAWAY's last stream id)
    /// and it could not be retried.
    public static var refused: Self { Self("refused") }
    /// The server broke the HTTP/2 protocol, reset the stream, or sent an unusable answer.
    public static var protocolError: Self { Self("protocolError") }
    /// The client was shut down.
    public static var shutdown: Self { Self("shutdown") }
    /// The request itself is malformed (bad path, method or header); it was not sent.
    public static var invalidRequest: Self { Self("invalidRequest") }
    /// The configuration is unusable (thrown by `HTTP2Client.init`).
    public static var invalidConfiguration: Self { Self("invalidConfiguration") }
}
