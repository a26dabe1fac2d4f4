/// A misbehaviour of APNs that the simulator plays for a request that passed validation.
public enum SimulatorFault: Sendable, Equatable {
    /// Answer with this status and `{"reason": ...}` (410 also carries `"timestamp"` in milliseconds).
    /// For example `(410, "Unregistered")`, `(429, "TooManyRequests")`, `(503, "ServiceUnavailable")`.
    case status(Int, reason: String)
    /// Never answer this stream.
    case stall
    /// Deliver and answer 200 after this delay.
    case delay(Duration)
    /// Send GOAWAY whose last-stream-id is the previous stream, so this request is refused unprocessed;
    /// then close the connection once the earlier streams are answered.
    case goaway
    /// Refuse the stream with RST_STREAM (REFUSED_STREAM), unprocessed.
    case resetStream
    /// Close the TCP connection at once, without answering.
    case dropConnection
    /// Close the TCP connection at once with a reset (RST, as a crashed server or a middlebox does), without
    /// answering: what the client had sent may have been processed.
    case resetConnection
}
