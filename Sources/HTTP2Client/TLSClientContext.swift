import COpenSSL
import Foundation

/// The client's OpenSSL context: TLS 1.2 or later, the peer's certificate verified against the
/// system's roots (plus an optional extra CA file), ALPN offering "h2" only.
///
/// Owns one `SSL_CTX`, freed in `deinit`.
// @unchecked Sendable: the SSL_CTX is fully configured in init and never changed afterwards;
// OpenSSL allows creating SSL objects from one context on several threads.
final class TLSClientContext: @unchecked Sendable {
    let context: OpaquePointer

    init(extraCAFile: String?) throws(HTTP2ClientError) {
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw HTTP2ClientError(.invalidConfiguration, "SSL_CTX_new failed", mayHaveBeenProcessed: false)
        }
        self.context = context
        // The macros SSL_CTX_set_min_proto_version and SSL_CTX_set_mode are SSL_CTX_ctrl calls.
        _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        _ = SSL_CTX_ctrl(
            context, SSL_CTRL_MODE, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), nil)
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        // The system's roots (Debian: /etc/ssl/certs and its bundle); an extra file adds to them.
        _ = SSL_CTX_set_default_verify_paths(context)
        if let extraCAFile {
            guard FileManager.default.isReadableFile(atPath: extraCAFile),
                SSL_CTX_load_verify_locations(context, extraCAFile, nil) == 1
            else {
                ERR_clear_error()
                throw HTTP2ClientError(
                    .invalidConfiguration, "cannot read the CA file \(extraCAFile)", mayHaveBeenProcessed: false)
            }
        }
        ERR_clear_error()
        let h2: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        // Returns 0 on success (unlike most of OpenSSL).
        guard SSL_CTX_set_alpn_protos(context, h2, UInt32(h2.count)) == 0 else {
            throw HTTP2ClientError(.invalidConfiguration, "cannot set ALPN", mayHaveBeenProcessed: false)
        }
    }

    deinit { SSL_CTX_free(context) }
}
