import COpenSSL

/// Reads OpenSSL's per-thread error queue into text for error reasons.
enum OpenSSLErrorQueue {
    /// Empties the calling thread's error queue and returns its entries joined by "; "
    /// (empty when the queue was empty). OpenSSL's messages name algorithms and
    /// functions, never key material.
    static func drain() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if messages.count >= 4 { continue }  // keep the reason short, still empty the queue
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let length = buffer.firstIndex(of: 0) ?? buffer.count
            messages.append(String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages.joined(separator: "; ")
    }

    /// A `CryptoError` whose reason is `context` followed by the drained queue, if any.
    static func error(_ code: CryptoError.Code, _ context: String) -> CryptoError {
        let queue = drain()
        return CryptoError(code, queue.isEmpty ? context : "\(context) (\(queue))")
    }
}
