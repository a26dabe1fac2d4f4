import COpenSSL
import Foundation
import TLS

extension P256.Signing {
    /// A P-256 public key that checks ES256 signatures.
    ///
    /// Owns an OpenSSL `EVP_PKEY`, freed in deinit; safe to use from many threads at once.
    // Safe to share across threads: the EVP_PKEY is never modified after init, and OpenSSL
    // allows concurrent read-only use of a key (each call has its own EVP_MD_CTX).
    public final class PublicKey: @unchecked Sendable {
        let key: OpaquePointer

        /// Reads a SubjectPublicKeyInfo PEM ("BEGIN PUBLIC KEY").
        ///
        /// Throws `.invalidPEM` when no public key can be read and `.wrongKeyType` for a key
        /// that is not EC on P-256.
        public init(pemRepresentation: String) throws(CryptoError) {
            let parsed = try OpenSSLKey.readPEM(pemRepresentation) { bio in PEM_read_bio_PUBKEY(bio, nil, nil, nil) }
            do {
                try OpenSSLKey.requireP256(parsed)
            } catch {
                EVP_PKEY_free(parsed)
                throw error
            }
            key = parsed
        }

        /// Reads an uncompressed point, `04 ‖ x ‖ y` (65 bytes, ANSI X9.63): how a PKCS#11 token gives an EC key's
        /// public half (`CKA_EC_POINT`).
        ///
        /// Throws `.invalidKey` unless the bytes are a point on P-256.
        public init(x963Representation point: [UInt8]) throws(CryptoError) {
            guard point.count == 65, point[0] == 0x04 else {
                throw CryptoError(.invalidKey, "not an uncompressed P-256 point (65 bytes from 04)")
            }
            // A SubjectPublicKeyInfo for id-ecPublicKey on prime256v1, its BIT STRING the point.
            let der = Self.p256InfoPrefix + point
            let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
                var cursor = buffer.baseAddress  // d2i advances the cursor
                return d2i_PUBKEY(nil, &cursor, buffer.count)
            }
            guard let parsed else { throw OpenSSLErrorQueue.error(.invalidKey, "the point is not on P-256") }
            key = parsed
        }

        /// The DER of a P-256 SubjectPublicKeyInfo up to its point: SEQUENCE { SEQUENCE { id-ecPublicKey,
        /// prime256v1 }, BIT STRING (no unused bits) }.
        static let p256InfoPrefix: [UInt8] = [
            0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86, 0x48,
            0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
        ]

        /// Copies only the public half of `privateKey` (through its DER SubjectPublicKeyInfo).
        init(publicPartOf privateKey: OpaquePointer) throws(CryptoError) {
            let length = i2d_PUBKEY(privateKey, nil)
            guard length > 0 else { throw OpenSSLErrorQueue.error(.internalError, "cannot encode the public key") }
            var der = [UInt8](repeating: 0, count: Int(length))
            let parsed: OpaquePointer? = der.withUnsafeMutableBufferPointer { buffer in
                var writeCursor = buffer.baseAddress  // i2d advances the cursor
                guard i2d_PUBKEY(privateKey, &writeCursor) == length else { return nil }
                var readCursor = UnsafePointer(buffer.baseAddress)  // d2i advances the cursor
                return d2i_PUBKEY(nil, &readCursor, Int(length))
            }
            guard let parsed else { throw OpenSSLErrorQueue.error(.internalError, "cannot decode the public key") }
            key = parsed
        }

        deinit { EVP_PKEY_free(key) }

        /// The key as SubjectPublicKeyInfo PEM ("BEGIN PUBLIC KEY").
        public var pemRepresentation: String {
            OpenSSLKey.writePEM { bio in PEM_write_bio_PUBKEY(bio, key) }
        }

        /// True only if `rawSignature` is a 64-byte r‖s ES256 signature of `data` by this key.
        public func isValidSignature(_ rawSignature: some ContiguousBytes, for data: some ContiguousBytes) -> Bool {
            rawSignature.withUnsafeBytes { raw in
                data.withUnsafeBytes { bytes in isValidSignature(raw, for: bytes) }
            }
        }

        func isValidSignature(_ raw: UnsafeRawBufferPointer, for data: UnsafeRawBufferPointer) -> Bool {
            defer { ERR_clear_error() }  // a bad signature is an answer, not an error to report
            guard let der = ECDSASignature.der(fromRaw: raw) else { return false }
            guard let context = EVP_MD_CTX_new() else { return false }
            defer { EVP_MD_CTX_free(context) }
            guard EVP_DigestVerifyInit(context, nil, OpenSSLAlgorithms.sha256.pointer, nil, key) == 1 else {
                return false
            }
            return der.withUnsafeBytes { signature in
                EVP_DigestVerify(context, signature.cBytes, signature.count, data.cBytes, data.count) == 1
            }
        }
    }
}
