import ErrorCodes

/// An error from setting up TLS: a client context's CA file, a server context's certificate or key, or OpenSSL
/// itself.
///
/// Equality is by ``code`` only; ``reason`` is for people.
public typealias TLSError = ModuleError<TLSErrorDomain>

/// The domain of ``TLSError``'s codes.
public enum TLSErrorDomain {}

extension ModuleError where Domain == TLSErrorDomain {
    /// An OpenSSL failure, with the thread's error queue drained into the reason.
    static func openSSL(_ what: String, code: Code = .openSSL) -> TLSError {
        let queue = OpenSSLErrorQueue.drain(keeping: .max)
        let detail = queue.isEmpty ? "" : " (\(queue))"
        return TLSError(code, what + detail)
    }
}

extension ErrorCode where Domain == TLSErrorDomain {
    /// The certificate or private key PEM could not be loaded, or does not match.
    public static var invalidCertificate: Self { Self("invalidCertificate") }
    /// The certificate's validity has ended.
    public static var expiredCertificate: Self { Self("expiredCertificate") }
    /// A client context's extra CA file cannot be read, or holds no certificate OpenSSL loads.
    public static var caFile: Self { Self("caFile") }
    /// OpenSSL failed (it could not allocate a context, or refused a setting).
    public static var openSSL: Self { Self("openSSL") }
}
