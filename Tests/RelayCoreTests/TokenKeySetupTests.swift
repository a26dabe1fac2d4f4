import RelayCore
import RelayCrypto
import Synchronization
import Testing

/// An APNs key given as a PKCS#11 URI, checked with the configuration (docs/DESIGN.md, "APNs keys in a PKCS#11
/// token"): the token is opened through the opener the I/O shell gives (here one of the test's), with
/// `apns.pkcs11_module` and `APNS_PKCS11_PIN`; the key then signs one provider token, which its public half must
/// verify; every problem names the environment and the URI, never the PIN.
@Suite struct TokenKeySetupTests {
    static let pin = "pin-7429-secret"
    static let uri = "pkcs11:token=duo-relay;object=apns-sandbox"

    func check(
        module: Bool = true, pin: Bool = true, opener: TokenKeyOpener?
    ) -> RelaySetup.Check {
        var environment = [
            "RELAY_KEYS": #"{"1":"\#(Base64.urlEncode([UInt8](repeating: 1, count: 32)))"}"#,
            "APNS_KEY_SANDBOX": Self.uri, "APNS_KEY_ID_SANDBOX": "KEYID12345", "APNS_TEAM_ID": "TEAM123456",
        ]
        if pin { environment["APNS_PKCS11_PIN"] = Self.pin }
        let configuration =
            #"{"apns":{"topic":"app.openduo.pocket""#
            + (module ? #","pkcs11_module":"/usr/lib/softhsm/libsofthsm2.so""# : "") + "}}"
        return RelaySetup.check(
            configuration: Array(configuration.utf8),
            secrets: SecretSource(environment: environment, readFile: { _ in "" }), tokens: opener)
    }

    @Test func aKeyInATokenIsOpenedWithTheModuleAndThePINAndSignsThere() throws {
        let key = P256.Signing.PrivateKey()
        let asked = Mutex<[String]>([])
        let checked = check { module, uri, pin in
            asked.withLock { $0.append("\(module) \(uri) \(pin == Self.pin)") }
            return .success(key)
        }
        #expect(checked.problems.isEmpty, "\(checked.problems)")
        #expect(asked.withLock { $0 } == ["/usr/lib/softhsm/libsofthsm2.so \(Self.uri) true"])
        let setup = try #require(checked.setup)
        #expect(setup.secrets.apnsKeys[.sandbox]?.uri?.description == Self.uri)
        #expect(
            setup.summary.contains("environments: sandbox (key id KEYID12345, in the token at \(Self.uri))"),
            "\(setup.summary)")
        let token = try #require(try setup.secrets.credentials(.sandbox)?.sign(issuedAt: 1_790_000_000))
        #expect(JWT.verifyES256(token, using: key.publicKey))
    }

    /// A token whose public key object with the key's id holds another key's public half: the tokens it signs would
    /// be refused by APNs, and `check` says so.
    @Test func aPublicHalfThatDoesNotVerifyIsRefused() {
        let checked = check { _, _, _ in .success(Mismatched()) }
        #expect(checked.setup == nil)
        #expect(checked.problems.map(\.subject) == ["APNS_KEY_SANDBOX"])
        #expect(
            checked.problems.first?.reason.contains(
                "sandbox: the key (\(Self.uri)) signs provider tokens its public key does not verify") == true,
            "\(checked.problems)")
    }

    @Test func aTokenThatCannotBeOpenedIsRefusedNamingTheEnvironmentAndTheURI() {
        let checked = check { _, _, _ in .failure(TokenKeyFailure("token \"duo-relay\" refused the login")) }
        #expect(checked.problems.count == 1)
        #expect(
            checked.problems.first?.description
                == "APNS_KEY_SANDBOX: sandbox: the key \(Self.uri) cannot be used: token \"duo-relay\" refused the login"
        )
        #expect(!checked.problems.contains { $0.description.contains(Self.pin) })
    }

    @Test func withoutTheModuleOrThePINTheTokenIsNotOpened() {
        let checked = check(module: false, pin: false) { _, _, _ in
            Issue.record("opened without a module or a PIN")
            return .success(P256.Signing.PrivateKey())
        }
        #expect(checked.problems.map(\.subject) == ["apns.pkcs11_module", "APNS_PKCS11_PIN"])
        #expect(checked.problems.allSatisfy { $0.reason.contains("APNS_KEY_SANDBOX names a key in a PKCS#11 token") })
        #expect(check(opener: nil).problems.map(\.subject) == ["APNS_KEY_SANDBOX"])
    }
}

/// A key whose public half is another key's.
private struct Mismatched: ProviderTokenSigner {
    let key = P256.Signing.PrivateKey()
    let publicKey = P256.Signing.PrivateKey().publicKey

    func es256Signature(for signingInput: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.es256Signature(for: signingInput)
    }
}
