import COpenSSL
import Foundation

/// A 256-bit secret key for AES-256-GCM.
///
/// The bytes live in a private allocation that is wiped when the last copy of the key goes
/// away; they are reachable only through `withUnsafeBytes`. Equality runs in constant time.
public struct SymmetricKey: Sendable, Equatable {
    /// The only supported size: 32 bytes (AES-256).
    public static let byteCount = 32

    private let storage: Storage

    /// Creates a key from exactly 32 bytes; any other size throws `.invalidKey`.
    public init(bytes: some ContiguousBytes) throws(CryptoError) {
        let storage: Storage? = bytes.withUnsafeBytes { raw in
            raw.count == Self.byteCount ? Storage(copying: raw) : nil
        }
        guard let storage else {
            throw CryptoError(.invalidKey, "an AES-256 key must be \(Self.byteCount) bytes")
        }
        self.storage = storage
    }

    /// Returns a new key of 32 random bytes.
    public static func generate() -> SymmetricKey {
        var random = SecureRandom.bytes(count: byteCount)
        defer { OPENSSL_cleanse(&random, random.count) }
        // A 32-byte input cannot fail.
        return try! SymmetricKey(bytes: random)
    }

    /// The key size in bytes (always 32).
    public var byteCount: Int { storage.bytes.count }

    /// Calls `body` with the key bytes. Do not let the pointer escape `body`.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(storage.bytes))
    }

    /// The decryption contexts this key keeps for `AES.GCM.open`.
    var openingContexts: CipherContextPool { storage.openingContexts }

    /// Compares two keys in constant time.
    public static func == (lhs: SymmetricKey, rhs: SymmetricKey) -> Bool {
        lhs.withUnsafeBytes { l in rhs.withUnsafeBytes { r in constantTimeEquals(l, r) } }
    }
}

extension SymmetricKey {
    /// Owns the key bytes and wipes them on deinit.
    // Safe to share across threads: the bytes are written once in init and only read afterwards.
    private final class Storage: @unchecked Sendable {
        let bytes: UnsafeMutableRawBufferPointer
        /// Contexts keyed with these bytes, for opening (freed, and wiped by OpenSSL, with the key).
        let openingContexts = CipherContextPool()

        init(copying source: UnsafeRawBufferPointer) {
            bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: source.count, alignment: 16)
            bytes.copyMemory(from: source)
        }

        deinit {
            if let base = bytes.baseAddress { OPENSSL_cleanse(base, bytes.count) }
            bytes.deallocate()
        }
    }
}

extension SymmetricKey: CustomStringConvertible {
    /// Never shows the key bytes.
    public var description: String { "SymmetricKey(\(byteCount) bytes)" }
}
