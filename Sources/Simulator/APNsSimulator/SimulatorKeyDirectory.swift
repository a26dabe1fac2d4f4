import Foundation
import RelayCrypto

/// The provider-token keys of a directory of APNs keys as Apple hands them out (`AuthKey_<KEY ID>.p8`, the
/// PKCS#8 PEM of a P-256 key): every such file, by the key id its name carries. With two keys in it the
/// simulator accepts tokens signed with either, as APNs does while a team has both, so that an operator can
/// rehearse a rotation (the relay moves to the new key on SIGHUP; the old key's file goes later).
public enum SimulatorKeyDirectory {
    /// Why a directory's keys cannot be read (names a file, never a key's bytes).
    public struct Problem: Error, CustomStringConvertible, Equatable {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// The key id in `name` when it is `AuthKey_<KEY ID>.p8` (the key id: 1 to 64 of `A-Z`, `a-z`, `0-9`); nil
    /// for a `.p8` named otherwise and for any other file.
    public static func keyID(fileName name: String) -> String? {
        guard name.hasPrefix("AuthKey_"), name.hasSuffix(".p8") else { return nil }
        let id = name.dropFirst("AuthKey_".count).dropLast(".p8".count)
        guard (1...64).contains(id.utf8.count),
            id.unicodeScalars.allSatisfy({ $0.isASCII && $0.properties.isAlphabetic || ("0"..."9").contains($0) })
        else { return nil }
        return String(id)
    }

    /// The public keys of every `.p8` in `directory`, by key id. A `.p8` not named `AuthKey_<KEY ID>.p8`, one
    /// that is not a P-256 private key, or a directory without any, is a problem.
    public static func keys(in directory: String) throws(Problem) -> [String: P256.Signing.PublicKey] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        } catch {
            throw Problem("--keys: \(directory) is not a directory that can be read")
        }
        var keys: [String: P256.Signing.PublicKey] = [:]
        for name in names where name.hasSuffix(".p8") {
            guard let id = keyID(fileName: name) else {
                throw Problem("--keys: \(name) is not named AuthKey_<KEY ID>.p8, as Apple names APNs keys")
            }
            let path = (directory as NSString).appendingPathComponent(name)
            guard let text = try? String(contentsOfFile: path, encoding: .utf8),
                let key = try? P256.Signing.PrivateKey(pemRepresentation: text)
            else { throw Problem("--keys: \(name) is not the PEM of a P-256 private key (an APNs .p8)") }
            keys[id] = key.publicKey
        }
        guard !keys.isEmpty else { throw Problem("--keys: \(directory) holds no AuthKey_<KEY ID>.p8") }
        return keys
    }
}
