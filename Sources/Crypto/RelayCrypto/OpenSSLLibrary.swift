import COpenSSL

/// OpenSSL as a whole process uses it.
public enum OpenSSLLibrary {
    /// Initializes OpenSSL without its exit-time cleanup; call it first thing in `main`, before anything else uses
    /// OpenSSL (the first initialization decides). Returns false if OpenSSL could not initialize.
    ///
    /// By default OpenSSL frees its global state in an `atexit` handler, while other threads may still be running:
    /// an APNs connection being retired, a dispatch worker. A thread that then uses OpenSSL touches freed memory,
    /// and a thread that ends then loses its per-thread random generators (LeakSanitizer reported those at the
    /// relay's exit). The process is ending anyway: the system reclaims the memory.
    @discardableResult
    public static func initializeWithoutExitCleanup() -> Bool {
        OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil) == 1
    }
}
