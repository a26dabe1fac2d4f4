/// How one request ended on one connection, as the connection's state machine judged it. The
/// pool decides from it whether the request is sent again (``PoolStateMachine``).
enum StreamOutcome: Sendable, Equatable {
    /// The whole answer arrived (any status).
    case answered(status: Int)
    /// Never handed to the socket: the server certainly did not see it.
    case notSent
    /// Given to a connection that could not be made: not sent.
    case connectFailed(HTTP2ClientError)
    /// RST_STREAM REFUSED_STREAM: sent, certainly not processed.
    case refusedStream
    /// Above a GOAWAY's last stream id: sent, certainly not processed. `alone`: it was the only
    /// stream open on its connection when the GOAWAY came, so it may have been what caused it.
    case refusedByGoaway(alone: Bool, stream: Int32)
    /// The server reset the stream otherwise: it may have processed it.
    case reset(code: UInt32)
    /// The connection broke after the request was written: it may have been processed.
    case lost(String)
    /// The deadline passed; `written` says whether the server may have seen it.
    case timedOut(written: Bool)
    /// The answer's body passed the client's limit.
    case tooLarge
    /// The client was shut down.
    case shutdown(written: Bool)

    /// The server certainly did not process the request.
    var certainlyNotProcessed: Bool {
        switch self {
        case .notSent, .connectFailed, .refusedStream, .refusedByGoaway: true
        case .timedOut(let written), .shutdown(let written): !written
        case .answered, .reset, .lost, .tooLarge: false
        }
    }

    /// The request's HEADERS left on this try (it counts as a send).
    var wasSent: Bool {
        switch self {
        case .notSent, .connectFailed: false
        case .timedOut(let written), .shutdown(let written): written
        case .answered, .refusedStream, .refusedByGoaway, .reset, .lost, .tooLarge: true
        }
    }

    /// The error a request ending with this outcome gets (nil for an answer).
    var error: HTTP2ClientError? {
        switch self {
        case .answered:
            return nil
        case .notSent:
            return HTTP2ClientError(
                .connectionLost, "the connection closed before the request was sent", mayHaveBeenProcessed: false)
        case .connectFailed(let error):
            return error
        case .refusedStream:
            return HTTP2ClientError(.refused, "the server refused the stream", mayHaveBeenProcessed: false)
        case .refusedByGoaway:
            return HTTP2ClientError(
                .refused, "the server is closing the connection (GOAWAY)", mayHaveBeenProcessed: false)
        case .reset(let code):
            return HTTP2ClientError(
                .protocolError, "the server reset the stream (\(Self.name(ofErrorCode: code)))",
                mayHaveBeenProcessed: true)
        case .lost(let reason):
            return HTTP2ClientError(.connectionLost, reason, mayHaveBeenProcessed: true)
        case .timedOut(let written):
            return HTTP2ClientError(.timeout, "no answer before the deadline", mayHaveBeenProcessed: written)
        case .tooLarge:
            return HTTP2ClientError(.protocolError, "the response body is too large", mayHaveBeenProcessed: true)
        case .shutdown(let written):
            return HTTP2ClientError(.shutdown, "the client was shut down", mayHaveBeenProcessed: written)
        }
    }

    /// RFC 9113 section 7 names.
    static func name(ofErrorCode code: UInt32) -> String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED",
            "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return code < names.count ? names[Int(code)] : "code \(code)"
    }
}
