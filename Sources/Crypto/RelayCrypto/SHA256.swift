import COpenSSL
import Foundation
import TLS

/// SHA-256 (FIPS 180-4) through OpenSSL.
public enum SHA256 {
    /// The digest size: 32 bytes.
    public static let byteCount = 32

    /// Returns the 32-byte SHA-256 digest of `data`.
    public static func hash(_ data: some ContiguousBytes) -> [UInt8] {
        data.withUnsafeBytes { input in
            [UInt8](unsafeUninitializedCapacity: byteCount) { out, initialized in
                var length: UInt32 = 0
                guard
                    EVP_Digest(
                        input.cBytes, input.count, out.baseAddress, &length, OpenSSLAlgorithms.sha256.pointer, nil)
                        == 1,
                    length == byteCount
                else {
                    // Only possible when OpenSSL cannot allocate memory.
                    fatalError("OpenSSL SHA-256 failed: \(OpenSSLErrorQueue.drain())")
                }
                initialized = byteCount
            }
        }
    }
}
