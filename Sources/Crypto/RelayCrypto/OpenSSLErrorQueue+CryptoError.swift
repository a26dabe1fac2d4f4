import TLS

extension OpenSSLErrorQueue {
    /// A `CryptoError` whose reason is `context` followed by the drained queue, if any.
    static func error(_ code: CryptoError.Code, _ context: String) -> CryptoError {
        let queue = drain()
        return CryptoError(code, queue.isEmpty ? context : "\(context) (\(queue))")
    }
}
