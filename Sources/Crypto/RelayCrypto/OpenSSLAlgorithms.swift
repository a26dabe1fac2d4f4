import COpenSSL
import TLS

/// Algorithm objects fetched once from OpenSSL's default provider.
///
/// Passing `EVP_aes_256_gcm()` or `EVP_sha256()` to an init call makes OpenSSL 3 fetch the
/// implementation again on every call (a locked lookup); fetching once removes that cost from
/// the hot path. The fetched objects are never freed: they live as long as the process.
enum OpenSSLAlgorithms {
    static let aes256GCM = FetchedAlgorithm(EVP_CIPHER_fetch(nil, "AES-256-GCM", nil), name: "AES-256-GCM")
    static let sha256 = FetchedAlgorithm(EVP_MD_fetch(nil, "SHA2-256", nil), name: "SHA2-256")
}

/// A fetched `EVP_CIPHER` or `EVP_MD`.
// Safe to share across threads: fetched algorithm objects are immutable and reference counted
// by OpenSSL, which documents them as usable from any number of threads at once.
struct FetchedAlgorithm: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer?, name: String) {
        guard let pointer else {
            fatalError("OpenSSL cannot provide \(name): \(OpenSSLErrorQueue.drain())")
        }
        self.pointer = pointer
    }
}

extension UnsafeRawBufferPointer {
    /// The base address as bytes, or a valid one-byte location when the buffer is empty:
    /// some OpenSSL functions reject a NULL pointer even with a length of zero.
    var cBytes: UnsafePointer<UInt8> {
        if let base = baseAddress { return base.assumingMemoryBound(to: UInt8.self) }
        return EmptyBuffer.byte
    }
}

private enum EmptyBuffer {
    /// Never read or written: only passed with a length of zero.
    nonisolated(unsafe) static let byte = UnsafePointer(UnsafeMutablePointer<UInt8>.allocate(capacity: 1))
}
