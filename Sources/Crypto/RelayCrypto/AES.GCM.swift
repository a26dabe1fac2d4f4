import COpenSSL
import Foundation
import Synchronization
import TLS

extension AES {
    /// AES-256 in Galois/Counter Mode (authenticated encryption with associated data), through
    /// OpenSSL's EVP interface. Each call uses a cipher context of its own (`open` one its key keeps between
    /// calls, see ``CipherContextPool``), so calls are safe from any number of threads.
    public enum GCM {
        /// The nonce size this API accepts: 12 bytes.
        public static let nonceByteCount = 12
        /// What `seal` produces: the ciphertext (as long as the plaintext) and its 16-byte tag.
        /// The nonce is the caller's (it chose it); where the three are stored is the caller's format.
        public struct Sealed: Sendable, Equatable {
            public var ciphertext: [UInt8]
            public var tag: [UInt8]

            public init(ciphertext: [UInt8], tag: [UInt8]) {
                self.ciphertext = ciphertext
                self.tag = tag
            }
        }

        /// The tag size this API produces and accepts: 16 bytes.
        public static let tagByteCount = 16

        /// Encrypts `plaintext` and authenticates it together with `aad`.
        ///
        /// - Parameters:
        ///   - nonce: 12 bytes, never reused with the same key; any other size throws `.invalidNonce`.
        /// - Returns: the ciphertext (as long as the plaintext) and the 16-byte tag.
        public static func seal(
            _ plaintext: some ContiguousBytes, using key: SymmetricKey, nonce: some ContiguousBytes,
            authenticating aad: some ContiguousBytes
        ) throws(CryptoError) -> Sealed {
            let result = key.withUnsafeBytes { keyBytes in
                nonce.withUnsafeBytes { nonceBytes in
                    aad.withUnsafeBytes { aadBytes in
                        plaintext.withUnsafeBytes { plainBytes in
                            Result { () throws(CryptoError) in
                                try seal(plainBytes, key: keyBytes, nonce: nonceBytes, aad: aadBytes)
                            }
                        }
                    }
                }
            }
            return try result.get()
        }

        /// Checks the tag over `ciphertext`, `nonce` and `aad`, and decrypts.
        ///
        /// Throws `.invalidNonce` for a nonce that is not 12 bytes and `.authenticationFailure`
        /// when anything was altered or the tag is not 16 bytes. No plaintext is returned
        /// unless authentication succeeds.
        public static func open(
            ciphertext: some ContiguousBytes, tag: some ContiguousBytes, nonce: some ContiguousBytes,
            using key: SymmetricKey, authenticating aad: some ContiguousBytes
        ) throws(CryptoError) -> [UInt8] {
            let result = key.withUnsafeBytes { keyBytes in
                nonce.withUnsafeBytes { nonceBytes in
                    aad.withUnsafeBytes { aadBytes in
                        tag.withUnsafeBytes { tagBytes in
                            ciphertext.withUnsafeBytes { cipherBytes in
                                Result { () throws(CryptoError) in
                                    try open(
                                        cipherBytes, tag: tagBytes, nonce: nonceBytes, key: keyBytes,
                                        contexts: key.openingContexts, aad: aadBytes)
                                }
                            }
                        }
                    }
                }
            }
            return try result.get()
        }

        // MARK: - Over raw buffers

        private static func seal(
            _ plaintext: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
            aad: UnsafeRawBufferPointer
        ) throws(CryptoError) -> Sealed {
            guard nonce.count == nonceByteCount else {
                throw CryptoError(.invalidNonce, "an AES-GCM nonce must be \(nonceByteCount) bytes")
            }
            guard plaintext.count <= Int(Int32.max), aad.count <= Int(Int32.max) else {
                throw CryptoError(.internalError, "AES-GCM input larger than 2 GiB")
            }
            let context = try CipherContext()
            guard
                EVP_EncryptInit_ex2(context.pointer, OpenSSLAlgorithms.aes256GCM.pointer, key.cBytes, nonce.cBytes, nil)
                    == 1
            else { throw OpenSSLErrorQueue.error(.internalError, "AES-GCM encryption setup failed") }
            try context.addAssociatedData(aad)

            var failed = false
            // One spare byte of capacity so the buffer has an address even for empty plaintext.
            let ciphertext = [UInt8](unsafeUninitializedCapacity: plaintext.count + 1) { out, initialized in
                var written: Int32 = 0
                if plaintext.count > 0 {
                    guard
                        EVP_EncryptUpdate(
                            context.pointer, out.baseAddress, &written, plaintext.cBytes, Int32(plaintext.count)) == 1
                    else { failed = true; return }
                }
                var finalWritten: Int32 = 0
                guard EVP_EncryptFinal_ex(context.pointer, out.baseAddress! + Int(written), &finalWritten) == 1
                else { failed = true; return }
                initialized = Int(written + finalWritten)
            }
            guard !failed, ciphertext.count == plaintext.count else {
                throw OpenSSLErrorQueue.error(.internalError, "AES-GCM encryption failed")
            }
            let tag = [UInt8](unsafeUninitializedCapacity: tagByteCount) { out, initialized in
                if EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount), out.baseAddress) == 1
                {
                    initialized = tagByteCount
                }
            }
            guard tag.count == tagByteCount else {
                throw OpenSSLErrorQueue.error(.internalError, "AES-GCM tag could not be read")
            }
            return Sealed(ciphertext: ciphertext, tag: tag)
        }

        private static func open(
            _ ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
            key: UnsafeRawBufferPointer, contexts: CipherContextPool, aad: UnsafeRawBufferPointer
        ) throws(CryptoError) -> [UInt8] {
            guard nonce.count == nonceByteCount else {
                throw CryptoError(.invalidNonce, "an AES-GCM nonce must be \(nonceByteCount) bytes")
            }
            guard tag.count == tagByteCount else {
                throw CryptoError(.authenticationFailure, "an AES-GCM tag must be \(tagByteCount) bytes")
            }
            guard ciphertext.count <= Int(Int32.max), aad.count <= Int(Int32.max) else {
                throw CryptoError(.internalError, "AES-GCM input larger than 2 GiB")
            }
            // A context already keyed with this key needs only the new nonce (see `CipherContextPool`).
            let reused = contexts.take()
            let context: CipherContext
            if let reused { context = reused } else { context = try CipherContext() }
            guard
                EVP_DecryptInit_ex2(
                    context.pointer, reused == nil ? OpenSSLAlgorithms.aes256GCM.pointer : nil,
                    reused == nil ? key.cBytes : nil, nonce.cBytes, nil)
                    == 1
            else { throw OpenSSLErrorQueue.error(.internalError, "AES-GCM decryption setup failed") }
            try context.addAssociatedData(aad)
            // OpenSSL only reads the tag; the parameter is not const for historical reasons.
            guard
                EVP_CIPHER_CTX_ctrl(
                    context.pointer, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount),
                    UnsafeMutableRawPointer(mutating: tag.cBytes))
                    == 1
            else { throw OpenSSLErrorQueue.error(.internalError, "AES-GCM tag could not be set") }

            var authenticated = false
            var plaintext = [UInt8](unsafeUninitializedCapacity: ciphertext.count + 1) { out, initialized in
                var written: Int32 = 0
                if ciphertext.count > 0 {
                    guard
                        EVP_DecryptUpdate(
                            context.pointer, out.baseAddress, &written, ciphertext.cBytes, Int32(ciphertext.count)) == 1
                    else { return }
                }
                initialized = Int(written)
                var finalWritten: Int32 = 0
                // The result of the final call is the authentication check.
                authenticated =
                    EVP_DecryptFinal_ex(context.pointer, out.baseAddress! + Int(written), &finalWritten) == 1
                initialized += Int(finalWritten)
            }
            guard authenticated, plaintext.count == ciphertext.count else {
                // Unauthenticated plaintext must not linger in memory. The context is not kept.
                plaintext.withUnsafeMutableBytes { if let base = $0.baseAddress { OPENSSL_cleanse(base, $0.count) } }
                ERR_clear_error()
                throw CryptoError(.authenticationFailure, "AES-GCM authentication failed")
            }
            // Only a context that has just opened a message whole goes back for the next call.
            contexts.put(context)
            return plaintext
        }
    }
}

/// Owns one `EVP_CIPHER_CTX`, freed (and wiped, by OpenSSL) in deinit. Used by one call on one thread at a time:
/// made for the call, or taken out of a ``CipherContextPool`` for it and put back after; hence `@unchecked
/// Sendable`, so that a pool may hold it between calls.
final class CipherContext: @unchecked Sendable {
    let pointer: OpaquePointer

    init() throws(CryptoError) {
        guard let pointer = EVP_CIPHER_CTX_new() else {
            throw OpenSSLErrorQueue.error(.internalError, "EVP_CIPHER_CTX_new failed")
        }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }

    func addAssociatedData(_ aad: UnsafeRawBufferPointer) throws(CryptoError) {
        guard aad.count > 0 else { return }
        var written: Int32 = 0
        guard EVP_CipherUpdate(pointer, nil, &written, aad.cBytes, Int32(aad.count)) == 1 else {
            throw OpenSSLErrorQueue.error(.internalError, "AES-GCM associated data rejected")
        }
    }
}

/// Decryption contexts already keyed with one key, kept by that key for `AES.GCM.open`. Keying a context (its
/// AES key schedule and GHASH tables) and making and freeing it cost more than opening a grant; a kept context
/// only takes the next nonce. A call takes a context out and puts it back once
/// it has opened a message, so no two calls share one; a call that fails frees its context. The pool holds no more
/// contexts than calls ever ran at once, at most `capacity`; they are freed with the key.
final class CipherContextPool: Sendable {
    static let capacity = 64
    private let idle = Mutex<[CipherContext]>([])

    init() {}

    func take() -> CipherContext? {
        idle.withLock { $0.popLast() }
    }

    func put(_ context: CipherContext) {
        idle.withLock { contexts in
            if contexts.count < Self.capacity { contexts.append(context) }
        }
    }
}
