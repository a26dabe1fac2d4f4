import COpenSSL
import Foundation
import TLS

/// HKDF with SHA-256 (RFC 5869), extract then expand, through OpenSSL's `EVP_KDF` "HKDF".
public enum HKDFSHA256 {
    /// Derives `count` bytes (1 to 8160) from the input keying material `key`, with `salt` (empty:
    /// RFC 5869's default, a string of zeros) and `info`.
    public static func deriveKey(
        from key: some ContiguousBytes, salt: [UInt8] = [], info: [UInt8], count: Int
    ) -> [UInt8] {
        precondition((1...255 * 32).contains(count), "HKDF-SHA256 derives 1 to 8160 bytes")
        guard let kdf = EVP_KDF_fetch(nil, "HKDF", nil) else {
            fatalError("OpenSSL has no HKDF: \(OpenSSLErrorQueue.drain())")
        }
        defer { EVP_KDF_free(kdf) }
        guard let context = EVP_KDF_CTX_new(kdf) else { fatalError("EVP_KDF_CTX_new failed") }
        defer { EVP_KDF_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: count)
        var digestName = Array("SHA256".utf8CString)
        // OSSL_PARAM keeps pointers: every buffer stays pinned until EVP_KDF_derive has returned.
        var keyCopy = key.withUnsafeBytes { [UInt8]($0) }
        defer { OPENSSL_cleanse(&keyCopy, keyCopy.count) }
        var salt = salt
        var info = info
        let status = digestName.withUnsafeMutableBufferPointer { digest in
            keyCopy.withUnsafeMutableBytes { keyBytes in
                info.withUnsafeMutableBytes { infoBytes in
                    salt.withUnsafeMutableBytes { saltBytes in
                        var params = [
                            OSSL_PARAM_construct_utf8_string(Names.digest, digest.baseAddress, 0),
                            OSSL_PARAM_construct_octet_string(Names.key, keyBytes.baseAddress, keyBytes.count),
                        ]
                        // An empty salt or info is left out (OpenSSL refuses a NULL buffer): RFC 5869's defaults.
                        if infoBytes.count > 0 {
                            params.append(
                                OSSL_PARAM_construct_octet_string(
                                    Names.info, infoBytes.baseAddress, infoBytes.count))
                        }
                        if saltBytes.count > 0 {
                            params.append(
                                OSSL_PARAM_construct_octet_string(
                                    Names.salt, saltBytes.baseAddress, saltBytes.count))
                        }
                        params.append(OSSL_PARAM_construct_end())
                        return EVP_KDF_derive(context, &out, count, params)
                    }
                }
            }
        }
        guard status == 1 else { fatalError("OpenSSL HKDF-SHA256 failed: \(OpenSSLErrorQueue.drain())") }
        return out
    }

    /// OSSL_PARAM keeps its key's pointer: C strings that live as long as the process (a Swift
    /// string passed as `const char *` lasts only for the call).
    // nonisolated(unsafe): each is written once (strdup, at first use) and only read afterwards.
    private enum Names {
        nonisolated(unsafe) static let digest = UnsafePointer(strdup(OSSL_KDF_PARAM_DIGEST)!)
        nonisolated(unsafe) static let key = UnsafePointer(strdup(OSSL_KDF_PARAM_KEY)!)
        nonisolated(unsafe) static let info = UnsafePointer(strdup(OSSL_KDF_PARAM_INFO)!)
        nonisolated(unsafe) static let salt = UnsafePointer(strdup(OSSL_KDF_PARAM_SALT)!)
    }
}
