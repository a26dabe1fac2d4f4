import COpenSSL
import TLS

/// Helpers shared by the P-256 key types: PEM in and out, and the key-type check.
enum OpenSSLKey {
    /// Raw r‖s signature size for P-256.
    static let rawSignatureByteCount = 64

    /// Reads the first PEM object in `pem` with `read`, which receives a memory BIO.
    static func readPEM(_ pem: String, _ read: (OpaquePointer) -> OpaquePointer?) throws(CryptoError) -> OpaquePointer {
        var text = Array(pem.utf8)
        defer { text.withUnsafeMutableBytes { if let base = $0.baseAddress { OPENSSL_cleanse(base, $0.count) } } }
        guard !text.isEmpty, text.count <= Int(Int32.max) else { throw CryptoError(.invalidPEM, "empty PEM text") }
        let key: OpaquePointer? = text.withUnsafeBytes { bytes in
            // A read-only BIO over our buffer; it does not copy or own the bytes.
            guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return nil }
            defer { BIO_free(bio) }
            return read(bio)
        }
        guard let key else { throw OpenSSLErrorQueue.error(.invalidPEM, "no usable key in the PEM text") }
        ERR_clear_error()
        return key
    }

    /// Writes with `write` into a memory BIO (a secure-heap one when available, so the
    /// buffer is wiped when freed) and returns the text.
    static func writePEM(_ write: (OpaquePointer) -> Int32) -> String {
        guard let bio = BIO_new(BIO_s_secmem()) ?? BIO_new(BIO_s_mem()) else {
            fatalError("OpenSSL cannot allocate a memory BIO: \(OpenSSLErrorQueue.drain())")
        }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else {
            fatalError("OpenSSL cannot write a PEM key: \(OpenSSLErrorQueue.drain())")
        }
        var data: UnsafeMutablePointer<CChar>? = nil
        let length = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data)  // BIO_get_mem_data is a macro
        guard let data, length > 0 else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }

    /// Throws `.wrongKeyType` unless `key` is an EC key on P-256.
    static func requireP256(_ key: OpaquePointer) throws(CryptoError) {
        guard EVP_PKEY_is_a(key, "EC") == 1 else {
            throw CryptoError(.wrongKeyType, "not an EC key: ES256 needs a P-256 key")
        }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else {
            throw OpenSSLErrorQueue.error(.wrongKeyType, "EC key without a named curve: ES256 needs P-256")
        }
        let group = String(decoding: name[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard group == "prime256v1" || group == "P-256" || group == "secp256r1" else {
            throw CryptoError(.wrongKeyType, "EC key on curve \(group): ES256 needs P-256")
        }
    }
}

/// A password callback that refuses: an encrypted PEM fails to parse instead of prompting
/// on the terminal (OpenSSL's behaviour when no callback is given).
let refusePassword: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = {
    _, _, _, _ in -1
}
