import COpenSSL
import TLS

/// Cryptographically secure random bytes from OpenSSL's RNG.
public enum SecureRandom {
    /// Returns `count` random bytes from `RAND_bytes`.
    ///
    /// Stops the process if OpenSSL's RNG fails: continuing without randomness would produce
    /// predictable keys and nonces.
    public static func bytes(count: Int) -> [UInt8] {
        precondition(count >= 0, "negative byte count")
        if count == 0 { return [] }
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var offset = 0
            while offset < count {
                let chunk = min(count - offset, Int(Int32.max))
                guard RAND_bytes(buffer.baseAddress! + offset, Int32(chunk)) == 1 else {
                    fatalError("OpenSSL RAND_bytes failed: \(OpenSSLErrorQueue.drain())")
                }
                offset += chunk
            }
            initialized = count
        }
    }
}
