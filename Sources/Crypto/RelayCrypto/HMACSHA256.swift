import COpenSSL
import Foundation
import TLS

/// HMAC with SHA-256 (RFC 2104, RFC 4231) through OpenSSL.
public enum HMACSHA256 {
    /// The size of an authentication code: 32 bytes.
    public static let byteCount = 32

    /// Returns the 32-byte HMAC-SHA256 of `data` under `key` (a key of any length).
    ///
    /// Compare codes with `constantTimeEquals`, never with `==`. A key used for many codes is cheaper as a
    /// ``Key``.
    public static func authenticationCode(for data: some ContiguousBytes, using key: some ContiguousBytes) -> [UInt8] {
        Key(key).authenticationCode(for: data)
    }

    /// A key made ready once for many codes: OpenSSL's HMAC context keyed and kept, copied for each code.
    ///
    /// OpenSSL's one-shot `HMAC()` looks up the HMAC and SHA-256 implementations by name and derives the key's
    /// pads on every call (most of the cost of a per-address limiter key); copying a keyed context is far
    /// cheaper. Immutable after `init`, so shared by any number of threads: each code works on
    /// its own copy, and copying only reads the kept context (OpenSSL's reference counts are atomic).
    public final class Key: @unchecked Sendable {
        private let keyed: OpaquePointer

        public init(_ key: some ContiguousBytes) {
            guard let context = EVP_MAC_CTX_new(HMACAlgorithm.mac) else {
                fatalError("EVP_MAC_CTX_new failed: \(OpenSSLErrorQueue.drain())")
            }
            var digestName = Array("SHA2-256".utf8CString)
            let status = digestName.withUnsafeMutableBufferPointer { digest in
                key.withUnsafeBytes { keyBytes in
                    var params = [
                        OSSL_PARAM_construct_utf8_string(HMACAlgorithm.digestParameter, digest.baseAddress, 0),
                        OSSL_PARAM_construct_end(),
                    ]
                    return EVP_MAC_init(context, keyBytes.cBytes, keyBytes.count, &params)
                }
            }
            guard status == 1 else { fatalError("OpenSSL HMAC-SHA256 key failed: \(OpenSSLErrorQueue.drain())") }
            keyed = context
        }

        deinit { EVP_MAC_CTX_free(keyed) }

        /// Returns the 32-byte HMAC-SHA256 of `data` under this key.
        public func authenticationCode(for data: some ContiguousBytes) -> [UInt8] {
            guard let context = EVP_MAC_CTX_dup(keyed) else {
                // Only possible when OpenSSL cannot allocate memory.
                fatalError("EVP_MAC_CTX_dup failed: \(OpenSSLErrorQueue.drain())")
            }
            defer { EVP_MAC_CTX_free(context) }
            return data.withUnsafeBytes { input in
                [UInt8](unsafeUninitializedCapacity: byteCount) { out, initialized in
                    var length = 0
                    guard EVP_MAC_update(context, input.cBytes, input.count) == 1,
                        EVP_MAC_final(context, out.baseAddress, &length, byteCount) == 1, length == byteCount
                    else {
                        fatalError("OpenSSL HMAC-SHA256 failed: \(OpenSSLErrorQueue.drain())")
                    }
                    initialized = byteCount
                }
            }
        }
    }
}

/// The HMAC implementation, fetched once (see ``OpenSSLAlgorithms``).
private enum HMACAlgorithm {
    // nonisolated(unsafe): each is written once (at first use) and only read afterwards; a fetched EVP_MAC is
    // immutable and documented as usable from any number of threads.
    nonisolated(unsafe) static let mac: OpaquePointer = {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else {
            fatalError("OpenSSL cannot provide HMAC: \(OpenSSLErrorQueue.drain())")
        }
        return mac
    }()
    /// OSSL_PARAM keeps its key's pointer: a C string that lives as long as the process.
    nonisolated(unsafe) static let digestParameter = UnsafePointer(strdup(OSSL_MAC_PARAM_DIGEST)!)
}
