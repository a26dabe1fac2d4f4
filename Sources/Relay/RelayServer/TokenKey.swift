import PKCS11
import RelayCore
import RelayCrypto

/// An APNs key held in a PKCS#11 token, as provider tokens see it: the token signs the SHA-256 of each JWT's signing
/// input with `CKM_ECDSA` (its raw `r ‖ s` is the JWS signature); the relay holds only the public half.
final class TokenKey: ProviderTokenSigner {
    let key: PKCS11PrivateKey
    let publicKey: P256.Signing.PublicKey

    init(_ key: PKCS11PrivateKey) throws(CryptoError) {
        self.key = key
        publicKey = try P256.Signing.PublicKey(x963Representation: key.publicPoint)
    }

    func es256Signature(for signingInput: [UInt8]) throws(CryptoError) -> [UInt8] {
        do {
            return try key.signature(forDigest: SHA256.hash(signingInput))
        } catch {
            throw CryptoError(.signingFailed, error.reason)
        }
    }

    /// Opens the key `uri` names with the module at `module`, logged in with `pin`: what `check`, `serve` and a
    /// reload open a token's key with (``RelaySetup/check(configuration:secrets:keygen:tokens:)``).
    static let opener: TokenKeyOpener = { module, uri, pin in
        do throws(PKCS11Error) {
            let loaded = try PKCS11Module.load(path: module)
            let key = try PKCS11PrivateKey(
                module: loaded, name: PKCS11KeyName(token: uri.token, object: uri.object, id: uri.id), pin: pin)
            do throws(CryptoError) {
                return .success(try TokenKey(key))
            } catch {
                return .failure(TokenKeyFailure("its public key is not a P-256 point: \(error.reason)"))
            }
        } catch {
            return .failure(TokenKeyFailure(error.reason))
        }
    }
}

/// The PKCS#11 client for the `duo-relay` command: what opens the APNs keys given as `pkcs11:` URIs.
public enum TokenKeys {
    public static var opener: TokenKeyOpener { TokenKey.opener }
}
