import COpenSSL
import Foundation
import TLS

extension P256.Signing {
    /// A P-256 private key for ES256 signatures, such as an APNs auth key (.p8).
    ///
    /// Owns an OpenSSL `EVP_PKEY`, freed in deinit. Signing creates its own context per call,
    /// so one key can sign from many threads at once.
    // Safe to share across threads: the EVP_PKEY is never modified after init, and OpenSSL
    // allows concurrent read-only use of a key (each call has its own EVP_MD_CTX).
    public final class PrivateKey: @unchecked Sendable {
        let key: OpaquePointer

        /// The matching public key.
        public let publicKey: PublicKey

        /// Generates a new random P-256 key.
        public init() {
            guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
                fatalError("OpenSSL cannot create an EC key context: \(OpenSSLErrorQueue.drain())")
            }
            defer { EVP_PKEY_CTX_free(context) }
            var generated: OpaquePointer? = nil
            guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
                EVP_PKEY_generate(context, &generated) == 1, let generated
            else {
                fatalError("OpenSSL cannot generate a P-256 key: \(OpenSSLErrorQueue.drain())")
            }
            key = generated
            do {
                publicKey = try PublicKey(publicPartOf: generated)
            } catch {
                fatalError("OpenSSL cannot export a public key: \(error)")
            }
        }

        /// Reads a PKCS#8 PEM private key ("BEGIN PRIVATE KEY", the form of Apple's .p8
        /// files; OpenSSL's "BEGIN EC PRIVATE KEY" form is accepted too).
        ///
        /// Throws `.invalidPEM` when no key can be read (encrypted keys included) and
        /// `.wrongKeyType` for a key that is not EC on P-256.
        public init(pemRepresentation: String) throws(CryptoError) {
            let parsed = try OpenSSLKey.readPEM(pemRepresentation) { bio in
                PEM_read_bio_PrivateKey(bio, nil, refusePassword, nil)
            }
            do {
                try OpenSSLKey.requireP256(parsed)
                publicKey = try PublicKey(publicPartOf: parsed)
            } catch {
                EVP_PKEY_free(parsed)
                throw error
            }
            key = parsed
        }

        deinit { EVP_PKEY_free(key) }

        /// The key as unencrypted PKCS#8 PEM ("BEGIN PRIVATE KEY"). This is the secret: treat
        /// the string accordingly.
        public var pemRepresentation: String {
            OpenSSLKey.writePEM { bio in PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) }
        }

        /// Signs `data` with ES256 (SHA-256 then ECDSA) and returns the 64-byte raw r‖s
        /// signature used by JWS. ECDSA is randomized: two signatures of the same data differ.
        public func signature(for data: some ContiguousBytes) throws(CryptoError) -> [UInt8] {
            let result = data.withUnsafeBytes { bytes in
                Result { () throws(CryptoError) in try signature(for: bytes) }
            }
            return try result.get()
        }

        private func signature(for data: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] {
            guard let context = EVP_MD_CTX_new() else {
                throw OpenSSLErrorQueue.error(.signingFailed, "EVP_MD_CTX_new failed")
            }
            defer { EVP_MD_CTX_free(context) }
            guard EVP_DigestSignInit(context, nil, OpenSSLAlgorithms.sha256.pointer, nil, key) == 1 else {
                throw OpenSSLErrorQueue.error(.signingFailed, "ES256 signing setup failed")
            }
            var length = Int(EVP_PKEY_get_size(key))
            guard length > 0 else { throw OpenSSLErrorQueue.error(.signingFailed, "unknown signature size") }
            var signed = false
            let der = [UInt8](unsafeUninitializedCapacity: length) { out, initialized in
                signed = EVP_DigestSign(context, out.baseAddress, &length, data.cBytes, data.count) == 1
                initialized = signed ? length : 0
            }
            guard signed else { throw OpenSSLErrorQueue.error(.signingFailed, "ES256 signing failed") }
            guard let raw = der.withUnsafeBytes({ ECDSASignature.raw(fromDER: $0) }) else {
                throw OpenSSLErrorQueue.error(.signingFailed, "OpenSSL returned an unexpected signature encoding")
            }
            return raw
        }
    }
}
