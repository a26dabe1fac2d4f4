import COpenSSL
import Foundation

/// Compares two byte sequences in time that depends only on their lengths (`CRYPTO_memcmp`).
///
/// Returns false when the lengths differ; lengths are not secret.
public func constantTimeEquals(_ a: some ContiguousBytes, _ b: some ContiguousBytes) -> Bool {
    a.withUnsafeBytes { left in
        b.withUnsafeBytes { right in
            guard left.count == right.count else { return false }
            guard let l = left.baseAddress, let r = right.baseAddress, left.count > 0 else { return true }
            return CRYPTO_memcmp(l, r, left.count) == 0
        }
    }
}
