import COpenSSL
import Foundation
import OpenSSLSupport

/// HMAC with SHA-256 (RFC 2104, RFC 4231) through OpenSSL's one-shot `HMAC()`.
public enum HMACSHA256 {
    /// The size of an authentication code: 32 bytes.
    public static let byteCount = 32

    /// Returns the 32-byte HMAC-SHA256 of `data` under `key` (a key of any length).
    ///
    /// Compare codes with `constantTimeEquals`, never with `==`.
    public static func authenticationCode(for data: some ContiguousBytes, using key: some ContiguousBytes) -> [UInt8] {
        key.withUnsafeBytes { keyBytes in
            data.withUnsafeBytes { input in
                precondition(keyBytes.count <= Int(Int32.max), "HMAC key larger than 2 GiB")
                return [UInt8](unsafeUninitializedCapacity: byteCount) { out, initialized in
                    var length: UInt32 = 0
                    guard
                        HMAC(
                            OpenSSLAlgorithms.sha256.pointer, keyBytes.cBytes, Int32(keyBytes.count), input.cBytes,
                            input.count, out.baseAddress, &length) != nil, length == byteCount
                    else {
                        // Only possible when OpenSSL cannot allocate memory.
                        fatalError("OpenSSL HMAC-SHA256 failed: \(OpenSSLErrorQueue.drain())")
                    }
                    initialized = byteCount
                }
            }
        }
    }
}
