import COpenSSL
import Foundation

/// A client's OpenSSL context: TLS 1.2 or later, the peer's certificate verified against the
/// system's roots (plus an optional extra CA file), offering the given ALPN protocols. Shared by
/// the APNs client (ALPN "h2") and the Redis limits store (no ALPN).
///
/// Owns one `SSL_CTX`, freed in `deinit`.
// @unchecked Sendable: the SSL_CTX is fully configured in init and never changed afterwards;
// OpenSSL allows creating SSL objects from one context on several threads.
public final class TLSClientContext: @unchecked Sendable {
    /// The `SSL_CTX`, valid while this object lives.
    let context: OpaquePointer

    /// Throws ``TLSError`` (a reason naming no secret): `caFile` when the extra CA file cannot be read, `openSSL`
    /// when OpenSSL cannot make the context.
    public init(extraCAFile: String?, alpn: [String]) throws(TLSError) {
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw TLSError.openSSL("SSL_CTX_new failed")
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
                throw TLSError(.caFile, "cannot read the CA file \(extraCAFile)")
            }
        }
        ERR_clear_error()
        guard !alpn.isEmpty else { return }
        let wire = ALPN.wireList(alpn)
        // Returns 0 on success (unlike most of OpenSSL).
        guard SSL_CTX_set_alpn_protos(context, wire, UInt32(wire.count)) == 0 else {
            throw TLSError.openSSL("cannot set ALPN")
        }
    }

    deinit { SSL_CTX_free(context) }

    /// A new client session with no BIO yet (``TLSSession/attach(_:)`` gives it one) that will verify the peer as
    /// `host` (a DNS name, with server name indication, or an IP address literal), or nil if that check cannot be
    /// set up: without it any certificate the roots trust would do. The caller owns the result
    /// (``TLSSession/free()``).
    public func session(host: String, hostIsAddress: Bool) -> TLSSession? {
        guard let ssl = SSL_new(context) else { return nil }
        let checked: Bool
        if hostIsAddress {
            checked = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1
        } else {
            // SSL_set_tlsext_host_name (server name indication) is an SSL_ctrl macro.
            let named = host.withCString {
                SSL_ctrl(
                    ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name),
                    UnsafeMutableRawPointer(mutating: $0))
            }
            checked = named == 1 && SSL_set1_host(ssl, host) == 1
        }
        guard checked else {
            ERR_clear_error()
            SSL_free(ssl)
            return nil
        }
        SSL_set_connect_state(ssl)
        return TLSSession(ssl)
    }
}
