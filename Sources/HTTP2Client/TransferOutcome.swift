import CCurl

/// How a finished transfer ends for its request and its connection: the mapping from curl's
/// result (and what the callbacks saw) to an answer or an ``HTTP2ClientError``, in one place.
struct TransferOutcome {
    /// What is known when curl gives a transfer back (or the connection takes it back).
    struct Facts {
        var code: CURLcode
        /// The request reached the point of being sent (CURLOPT_PREREQFUNCTION ran).
        var submitted = false
        /// curl logged a refused stream (RST_STREAM REFUSED_STREAM, or above GOAWAY's last id).
        var refusedByServer = false
        /// curl wanted to send the request again by itself; the connection aborted it.
        var curlWantsRetry = false
        /// curl tried to reconnect in place and was refused.
        var reconnectBlocked = false
        /// The body passed `Transfer.maxResponseBodyBytes`.
        var responseTooLarge = false
        /// The request's deadline has passed (or is within a millisecond).
        var deadlinePassed = false
        /// The connection's TLS connection had been up before.
        var connectionEstablished = false
        /// curl's error text, used only for connect and TLS failures (it names the host, never the path).
        var detail = ""
    }

    /// `nil` when the transfer succeeded: the caller builds the response.
    let error: HTTP2ClientError?
    /// The connection must take no more requests.
    let retireConnection: Bool

    init(_ facts: Facts) {
        let sent = facts.submitted
        func fail(_ code: HTTP2ClientError.Code, _ reason: String, processed: Bool, retire: Bool) -> (
            HTTP2ClientError, Bool
        ) {
            (HTTP2ClientError(code, reason, mayHaveBeenProcessed: processed), retire)
        }
        let withDetail: (String) -> String = { facts.detail.isEmpty ? $0 : "\($0): \(facts.detail)" }
        let result: (HTTP2ClientError, Bool)?
        if facts.refusedByServer {
            // RST_STREAM REFUSED_STREAM or GOAWAY below our stream id: not processed (RFC 9113 8.7).
            result = fail(.refused, "the server refused the stream", processed: false, retire: true)
        } else if facts.curlWantsRetry || facts.reconnectBlocked {
            result =
                sent
                ? fail(.connectionLost, "the connection closed before the answer", processed: true, retire: true)
                : fail(
                    .connectionLost, "the connection closed before the request was sent", processed: false, retire: true
                )
        } else {
            switch facts.code {
            case CURLE_OK:
                result = nil
            case CURLE_OPERATION_TIMEDOUT:
                if facts.deadlinePassed || sent {
                    // A request sent and not answered in time: the connection has gone silent.
                    result = fail(
                        .timeout, "no answer before the deadline", processed: sent,
                        retire: sent || !facts.connectionEstablished)
                } else {
                    result = fail(.connectFailed, withDetail("connect timed out"), processed: false, retire: true)
                }
            case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT:
                result = fail(
                    .connectFailed, withDetail(TransferOutcome.describe(facts.code)), processed: false, retire: true)
            case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
                CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
                CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ENGINE_INITFAILED,
                CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_CLIENTCERT, CURLE_USE_SSL_FAILED:
                result = fail(.tls, withDetail(TransferOutcome.describe(facts.code)), processed: sent, retire: true)
            case CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_SEND_FAIL_REWIND:
                result = fail(
                    .connectionLost, TransferOutcome.describe(facts.code), processed: sent, retire: true)
            case CURLE_HTTP2, CURLE_HTTP2_STREAM:
                // A framing error, a stream reset, or the connection ending under open streams.
                result = fail(.protocolError, TransferOutcome.describe(facts.code), processed: sent, retire: true)
            case CURLE_WRITE_ERROR where facts.responseTooLarge:
                result = fail(.protocolError, "the response body is too large", processed: true, retire: false)
            default:
                result = fail(.protocolError, TransferOutcome.describe(facts.code), processed: sent, retire: true)
            }
        }
        error = result?.0
        retireConnection = result?.1 ?? false
    }

    /// curl's static description of a result code (never request data).
    static func describe(_ code: CURLcode) -> String {
        curl_easy_strerror(code).map { String(cString: $0) } ?? "curl error \(code.rawValue)"
    }
}
