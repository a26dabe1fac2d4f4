import RelayCrypto

/// A reload's rule for an APNs environment's key and its key id (docs/DESIGN.md, "Lifecycle"): they change together or
/// not at all. A key is the same key when its public key is the same, wherever it is held (a new .p8 text, or a
/// `pkcs11:` URI that now names another key in a token, is a new key). Apple gives every key its own id, so a new key
/// under the running id (or the running key under a new id) can only be a mistake, which APNs would answer with 403
/// for every push.
public enum APNsKeyChange {
    /// Why the running credentials of `environment` cannot be replaced by `new`, or nil when the key and its id
    /// both change, or neither does. The reason names the environment and its variables, and the ids (an id is not
    /// a secret); never a key.
    public static func problem(
        running: ProviderCredentials, new: ProviderCredentials, environment: APNsEnvironment
    ) -> ConfigurationError? {
        let sameKey = running.signer.publicKey.pemRepresentation == new.signer.publicKey.pemRepresentation
        let sameID = running.keyID == new.keyID
        guard sameKey != sameID else { return nil }
        let suffix = environment.variableSuffix
        if sameID {
            return ConfigurationError(
                .invalid, "APNS_KEY_" + suffix,
                "\(environment.name): a new key under the running key id \(new.keyID): Apple gives every key its "
                    + "own id, so APNs would refuse every push (403); set APNS_KEY_ID_\(suffix) to the new key's id "
                    + "(the running key stays)")
        }
        return ConfigurationError(
            .invalid, "APNS_KEY_ID_" + suffix,
            "\(environment.name): a new key id \(new.keyID) with the running key (id \(running.keyID)): Apple gives "
                + "every key its own id, so APNs would refuse every push (403); replace APNS_KEY_\(suffix) with "
                + "that id's key too (the running key stays)")
    }
}
