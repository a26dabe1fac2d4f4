import COpenSSL
import ErrorCodes

/// A server's OpenSSL context: the APNs simulator's (TLS 1.2+, ALPN "h2" only) or the relay's HTTP/1.1 front
/// (docs/DESIGN.md, "TLS": TLS 1.2 and 1.3, in TLS 1.2 ECDHE with AEAD ciphers only, ALPN `http/1.1` or none).
///
/// Owns one `SSL_CTX`, freed in `deinit`. A session made from it holds its own reference to the `SSL_CTX`, so a
/// context replaced by a reload (``TLSServerContext/init(httpFrontChainPEM:privateKeyPEM:now:)``) lives on in the
/// connections that use it.
// @unchecked Sendable: the SSL_CTX is fully configured in init and never mutated afterwards;
// OpenSSL allows creating SSL objects from one context on several threads.
public final class TLSServerContext: @unchecked Sendable {
    let context: OpaquePointer
    /// The leaf certificate served: its subject, expiry and fingerprint (none of them a secret).
    public private(set) var leaf: CertificateSummary

    /// The simulator's context: `certificatePEM` (the leaf, then any chain) and its key, ALPN "h2" only.
    public convenience init(certificatePEM: String, privateKeyPEM: String) throws(TLSError) {
        try self.init(chainPEM: certificatePEM, privateKeyPEM: privateKeyPEM, front: false)
    }

    /// The relay's front: `chainPEM` is the leaf first, then its chain (certbot's `fullchain.pem`, cert-manager's
    /// `tls.crt`); `privateKeyPEM` an unencrypted key matching the leaf, ECDSA P-256 or P-384 or RSA of at least 2048
    /// bits. A pair whose leaf has expired at `now` (Unix seconds) is refused. Every refusal's reason says what is
    /// wrong in words (never key material).
    public convenience init(httpFrontChainPEM chainPEM: String, privateKeyPEM: String, now: Int64) throws(TLSError) {
        try self.init(chainPEM: chainPEM, privateKeyPEM: privateKeyPEM, front: true)
        guard leaf.notAfter > now else {
            throw TLSError(.expiredCertificate, "the certificate expired on \(leaf.expiryText)")
        }
    }

    private init(chainPEM: String, privateKeyPEM: String, front: Bool) throws(TLSError) {
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw TLSError.openSSL("SSL_CTX_new failed")
        }
        // Freed by deinit from here, also when init throws below.
        self.context = context
        leaf = CertificateSummary.none
        // The macros SSL_CTX_set_min_proto_version and SSL_CTX_set_mode are SSL_CTX_ctrl calls.
        _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        _ = SSL_CTX_ctrl(
            context, SSL_CTRL_MODE,
            Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS), nil)

        let chain = try Self.certificates(chainPEM)
        defer { chain.forEach { X509_free($0) } }
        let key = try Self.privateKey(privateKeyPEM)
        defer { EVP_PKEY_free(key) }
        // Before OpenSSL's own check of the certificate's key, whose words ("ee key too small") say less.
        if front { try Self.requireServableKey(key) }
        guard SSL_CTX_use_certificate(context, chain[0]) == 1 else {
            throw TLSError.openSSL("the certificate was refused", code: .invalidCertificate)
        }
        for intermediate in chain.dropFirst() {
            // SSL_CTX_add1_chain_cert is an SSL_CTX_ctrl macro; "add1" takes a reference of its own.
            guard SSL_CTX_ctrl(context, SSL_CTRL_CHAIN_CERT, 1, UnsafeMutableRawPointer(intermediate)) == 1 else {
                throw TLSError.openSSL("a chain certificate was refused", code: .invalidCertificate)
            }
        }
        guard SSL_CTX_use_PrivateKey(context, key) == 1, SSL_CTX_check_private_key(context) == 1 else {
            OpenSSLErrorQueue.clear()
            throw TLSError(.invalidCertificate, "the private key does not match the certificate")
        }
        leaf = try CertificateSummary(chain[0])
        if front {
            // TLS 1.2: forward secrecy and authenticated encryption only; TLS 1.3's suites are all AEAD.
            guard SSL_CTX_set_cipher_list(context, Self.tls12Ciphers) == 1 else {
                throw TLSError.openSSL("cannot set the TLS 1.2 ciphers")
            }
            _ = SSL_CTX_set_options(
                context, COpenSSL_SSL_OP_NO_RENEGOTIATION | COpenSSL_SSL_OP_CIPHER_SERVER_PREFERENCE)
            // No per-context cache of sessions to grow with the clients: resumption goes by tickets, which a new
            // context (a reload) simply stops accepting.
            _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_SESS_CACHE_MODE, Int(SSL_SESS_CACHE_OFF), nil)
            SSL_CTX_set_alpn_select_cb(context, selectHTTP11, nil)
        } else {
            SSL_CTX_set_alpn_select_cb(context, selectH2, nil)
        }
        OpenSSLErrorQueue.clear()
    }

    deinit {
        SSL_CTX_free(context)
    }

    /// The TLS 1.2 suites the front offers (ECDHE, AES-GCM or ChaCha20-Poly1305), strongest first.
    static let tls12Ciphers =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
        + "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

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

    /// A new server session reading and writing through `records` (which must outlive it: free the session
    /// first), waiting for a client's hello; nil when OpenSSL cannot allocate it. The caller owns the result
    /// (``TLSSession/free()``).
    public func session(through records: StreamBIO) -> TLSSession? {
        guard let ssl = SSL_new(context) else {
            OpenSSLErrorQueue.clear()
            return nil
        }
        let session = TLSSession(ssl)
        guard session.attach(records) else {
            OpenSSLErrorQueue.clear()
            SSL_free(ssl)
            return nil
        }
        SSL_set_accept_state(ssl)
        return session
    }

    /// Every certificate of a PEM file's text, in order; the caller frees each with `X509_free`.
    private static func certificates(_ pem: String) throws(TLSError) -> [OpaquePointer] {
        let bytes = Array(pem.utf8)
        let found: [OpaquePointer] = bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return [] }
            defer { BIO_free(bio) }
            var certificates: [OpaquePointer] = []
            while let certificate = PEM_read_bio_X509(bio, nil, refusePassword, nil) {
                certificates.append(certificate)
            }
            return certificates
        }
        // The end of the text reads as an error (no start line): not one.
        OpenSSLErrorQueue.clear()
        guard !found.isEmpty else {
            throw TLSError(.invalidCertificate, "the certificate file holds no PEM certificate")
        }
        return found
    }

    /// The unencrypted private key of a PEM text; the caller frees it with `EVP_PKEY_free`.
    private static func privateKey(_ pem: String) throws(TLSError) -> OpaquePointer {
        let bytes = Array(pem.utf8)
        let key: OpaquePointer? = bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, refusePassword, nil)
        }
        OpenSSLErrorQueue.clear()
        guard let key else {
            throw TLSError(
                .invalidCertificate,
                "the key file holds no unencrypted PEM private key (an encrypted key cannot be used)")
        }
        return key
    }

    /// ECDSA P-256 or P-384, or RSA of at least 2048 bits: what every client verifies and none finds weak.
    private static func requireServableKey(_ key: OpaquePointer) throws(TLSError) {
        if EVP_PKEY_is_a(key, "RSA") == 1 {
            let bits = EVP_PKEY_get_bits(key)
            guard bits >= 2048 else {
                throw TLSError(.invalidCertificate, "the key is RSA of \(bits) bits: at least 2048 are needed")
            }
            return
        }
        if EVP_PKEY_is_a(key, "EC") == 1 {
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            _ = EVP_PKEY_get_group_name(key, &name, name.count, &length)
            let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard ["prime256v1", "P-256", "secp384r1", "P-384"].contains(group) else {
                throw TLSError(.invalidCertificate, "the key is ECDSA on \(group): P-256 or P-384 is needed")
            }
            return
        }
        throw TLSError(.invalidCertificate, "the key is neither ECDSA (P-256, P-384) nor RSA")
    }
}

/// Never asks for a password (OpenSSL's default would read one from the terminal): an encrypted key is refused.
private func refusePassword(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int32, _ writing: Int32, _ argument: UnsafeMutableRawPointer?
) -> Int32 {
    -1
}

/// ALPN for the simulator: choose "h2" or fail the handshake (APNs speaks nothing else).
private func selectH2(
    _ ssl: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    _ outLength: UnsafeMutablePointer<UInt8>?,
    _ offered: UnsafePointer<UInt8>?, _ offeredLength: UInt32, _ argument: UnsafeMutableRawPointer?
) -> Int32 {
    select(ALPN.http2, out, outLength, offered, offeredLength)
}

/// ALPN for the relay's front: "http/1.1", or the no_application_protocol alert for an offer without it (OpenSSL
/// calls this only when the client offers ALPN; a client offering none is served).
private func selectHTTP11(
    _ ssl: OpaquePointer?, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    _ outLength: UnsafeMutablePointer<UInt8>?,
    _ offered: UnsafePointer<UInt8>?, _ offeredLength: UInt32, _ argument: UnsafeMutableRawPointer?
) -> Int32 {
    select(ALPN.http11, out, outLength, offered, offeredLength)
}

private func select(
    _ name: String, _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?, _ outLength: UnsafeMutablePointer<UInt8>?,
    _ offered: UnsafePointer<UInt8>?, _ offeredLength: UInt32
) -> Int32 {
    guard let out, let outLength, let offered,
        let start = ALPN.find(name, in: UnsafeBufferPointer(start: offered, count: Int(offeredLength)))
    else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    // `out` must point into the offer itself.
    out.pointee = offered + start
    outLength.pointee = UInt8(name.utf8.count)
    return SSL_TLSEXT_ERR_OK
}
