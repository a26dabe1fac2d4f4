import COpenSSL

/// One step of a TLS handshake on a non-blocking socket, read the same way by every TLS user: the
/// APNs client and the Redis client (client side) and the simulator (server side). The callers
/// differ only in how they wait (their own poll loop) and what they call a failure.
public enum TLSHandshake {
    /// Where a step left the handshake.
    public enum Step: Equatable, Sendable {
        /// The handshake is complete: the connection may carry data.
        case done
        /// The socket must become readable before the next step.
        case wantsReadable
        /// The socket must become writable before the next step.
        case wantsWritable
        /// The peer's certificate did not verify; OpenSSL's words for why (no key material).
        case certificateRejected(String)
        /// Any other failure (the peer closed, a protocol error, no common ALPN protocol): the first
        /// entry of OpenSSL's error queue, or "the connection closed" when the queue was empty.
        case failed(String)
    }

    /// Runs `SSL_do_handshake` once on `ssl` (set up for the connect or accept side). A failure
    /// empties the thread's error queue, so nothing stale is read by the next OpenSSL call.
    static func step(_ ssl: OpaquePointer) -> Step {
        OpenSSLErrorQueue.clear()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ:
            return .wantsReadable
        case SSL_ERROR_WANT_WRITE:
            return .wantsWritable
        default:
            // The first queued entry is the reason; the rest only repeat where it surfaced.
            let reason = OpenSSLErrorQueue.drain(keeping: 1)
            let verification = SSL_get_verify_result(ssl)
            if verification != X509_V_OK {
                return .certificateRejected(
                    X509_verify_cert_error_string(verification).map { String(cString: $0) } ?? "unknown")
            }
            return .failed(reason.isEmpty ? "the connection closed" : reason)
        }
    }
}

extension TLSHandshake {
    /// Where a step of a server's handshake left it.
    public enum AcceptStep: Equatable, Sendable {
        case done
        /// More of the client's records are needed (what the server wrote meanwhile is in its BIO).
        case inProgress
        case failed(AcceptFailure)
    }

    /// Why a server's handshake failed, in the kinds an operator counts (docs/DESIGN.md, "TLS"). No kind says who
    /// the client was.
    public enum AcceptFailure: String, Equatable, Sendable {
        /// The client's records broke TLS, or had nothing in common with the server's (an old version, no shared
        /// cipher or group, bytes that are not TLS).
        case `protocol`
        /// The client offered ALPN without a protocol the server speaks (it got `no_application_protocol`).
        case alpn
        /// Anything else: the client's own alert (it refused the certificate), its close, a local failure.
        case other
    }

    /// Runs `SSL_do_handshake` once on a server's `ssl`, leaving the thread's error queue empty.
    static func acceptStep(_ ssl: OpaquePointer) -> AcceptStep {
        OpenSSLErrorQueue.clear()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .inProgress
        default:
            let code = ERR_peek_error()
            ERR_clear_error()
            return .failed(Self.kind(of: code))
        }
    }

    /// The kind of a server handshake's first queued error (0: none, the peer closed).
    static func kind(of code: UInt) -> AcceptFailure {
        guard code != 0, ERR_GET_LIB(code) == ERR_LIB_SSL else { return .other }
        let reason = ERR_GET_REASON(code)
        if reason == SSL_R_NO_APPLICATION_PROTOCOL { return .alpn }
        // Reasons from 1000 on are alerts the client sent (SSL_AD_REASON_OFFSET): its decision, not a protocol fault.
        if reason >= 1000 { return .other }
        return .protocol
    }
}
