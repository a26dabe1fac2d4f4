import COpenSSL
import ErrorCodes

/// A server's OpenSSL context (the APNs simulator's): certificate, key, TLS 1.2+, ALPN "h2" only.
///
/// Owns one `SSL_CTX`, freed in `deinit`.
// @unchecked Sendable: the SSL_CTX is fully configured in init and never mutated afterwards;
// OpenSSL allows creating SSL objects from one context on several threads.
public final class TLSServerContext: @unchecked Sendable {
    let context: OpaquePointer

    public init(certificatePEM: String, privateKeyPEM: String) throws(TLSError) {
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw TLSError.openSSL("SSL_CTX_new failed")
        }
        self.context = context
        // The macros SSL_CTX_set_min_proto_version and SSL_CTX_set_mode are SSL_CTX_ctrl calls.
        _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        _ = SSL_CTX_ctrl(
            context, SSL_CTRL_MODE,
            Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS), nil)

        let certificate = try Self.read(certificatePEM) { PEM_read_bio_X509($0, nil, nil, nil) }
        defer { X509_free(certificate) }
        let key = try Self.read(privateKeyPEM) { PEM_read_bio_PrivateKey($0, nil, nil, nil) }
        defer { EVP_PKEY_free(key) }
        guard SSL_CTX_use_certificate(context, certificate) == 1 else {
            throw TLSError.openSSL("the certificate was refused", code: .invalidCertificate)
        }
        guard SSL_CTX_use_PrivateKey(context, key) == 1, SSL_CTX_check_private_key(context) == 1 else {
            throw TLSError.openSSL("the private key was refused or does not match", code: .invalidCertificate)
        }
        SSL_CTX_set_alpn_select_cb(context, selectH2, nil)
    }

    deinit {
        SSL_CTX_free(context)
    }

    /// A new server session on two memory BIOs (``TLSSession/receive(_:)`` feeds the input,
    /// ``TLSSession/flushOutput(through:_:)`` empties the output), waiting for a client's hello; nil when OpenSSL
    /// cannot allocate it. The caller owns the result (``TLSSession/free()``, which frees both BIOs).
    public func session() -> TLSSession? {
        guard let ssl = SSL_new(context) else {
            OpenSSLErrorQueue.clear()
            return nil
        }
        guard let input = BIO_new(BIO_s_mem()), let output = BIO_new(BIO_s_mem()) else {
            OpenSSLErrorQueue.clear()
            SSL_free(ssl)
            return nil
        }
        SSL_set_bio(ssl, input, output)  // the SSL takes both references
        SSL_set_accept_state(ssl)
        return TLSSession(ssl)
    }

    private static func read(_ pem: String, _ parse: (OpaquePointer) -> OpaquePointer?) throws(TLSError)
        -> OpaquePointer
    {
        let bytes = Array(pem.utf8)
        let object: OpaquePointer? = bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return parse(bio)
        }
        guard let object else { throw TLSError.openSSL("PEM parsing failed", code: .invalidCertificate) }
        return object
    }
}

/// ALPN: choose "h2" or fail the handshake (APNs speaks nothing else).
private func selectH2(
    _ ssl: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    _ outLength: UnsafeMutablePointer<UInt8>?,
    _ offered: UnsafePointer<UInt8>?, _ offeredLength: UInt32, _ argument: UnsafeMutableRawPointer?
) -> Int32 {
    guard let out, let outLength, let offered,
        let start = ALPN.find(ALPN.http2, in: UnsafeBufferPointer(start: offered, count: Int(offeredLength)))
    else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    // `out` must point into the offer itself.
    out.pointee = offered + start
    outLength.pointee = UInt8(ALPN.http2.utf8.count)
    return SSL_TLSEXT_ERR_OK
}
