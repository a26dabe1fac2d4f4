import COpenSSL
import Foundation
import TLS

/// SHA-1 through OpenSSL: only for names a protocol defines with it (Redis names a script by its SHA-1), never
/// for security.
public enum SHA1 {
    /// The digest size: 20 bytes.
    public static let byteCount = 20

    /// Returns the 20-byte SHA-1 digest of `data`.
    public static func hash(_ data: some ContiguousBytes) -> [UInt8] {
        data.withUnsafeBytes { input in
            [UInt8](unsafeUninitializedCapacity: byteCount) { out, initialized in
                var length: UInt32 = 0
                guard EVP_Digest(input.baseAddress, input.count, out.baseAddress, &length, EVP_sha1(), nil) == 1,
                    length == byteCount
                else {
                    // Only possible when OpenSSL cannot allocate memory.
                    fatalError("OpenSSL SHA-1 failed: \(OpenSSLErrorQueue.drain())")
                }
                initialized = byteCount
            }
        }
    }
}
