import COpenSSL

/// OpenSSL's per-thread error queue read into text for error reasons: the one reader every module that
/// calls OpenSSL uses (the crypto, the APNs client, the simulator).
public enum OpenSSLErrorQueue {
    /// Empties the calling thread's error queue and returns its first `keeping` entries joined by "; "
    /// (empty when the queue was empty). OpenSSL's messages name algorithms, functions and reasons
    /// (a certificate that does not verify), never key material.
    public static func drain(keeping: Int = 4) -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if messages.count >= keeping { continue }  // keep the reason short, still empty the queue
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages.joined(separator: "; ")
    }

    /// Empties the calling thread's error queue if it holds anything: what to call before an `SSL_*` call whose
    /// failure is read with `SSL_get_error`. `ERR_clear_error` alone walks all sixteen slots of the queue every
    /// time (several times a push on the APNs connection); the queue is empty on every
    /// path that has not failed, and looking costs little.
    @inlinable @inline(__always)
    public static func clear() {
        if ERR_peek_error() != 0 { ERR_clear_error() }
    }
}
