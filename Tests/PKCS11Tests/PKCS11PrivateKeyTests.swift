import Foundation
import PKCS11
import RelayCrypto
import RelayTestSupport
import Synchronization
import Testing

/// The PKCS#11 client against a real token (SoftHSM): a key found by its name signs inside the token, and every
/// way a name can fail to give one key is refused with its own code and a reason that never holds the PIN.
///
/// A process initialises a module once, and SoftHSM reads its configuration then: every test of this process uses
/// one SoftHSM directory (``SharedSoftHSM``), each with a token of its own in it.
@Suite struct PKCS11PrivateKeyTests {
    static let pin = "pin-\(UUID().uuidString.prefix(8))"

    func token(_ scenario: String) throws -> SoftHSMToken {
        try SharedSoftHSM.token(scenario, pin: Self.pin).0
    }

    @Test func aTokenKeySignsWhatItsSoftwareTwinVerifies() throws {
        let (token, software) = try SharedSoftHSM.token("signs", pin: Self.pin)
        let key = try #require(software)
        let module = try PKCS11Module.load(path: SoftHSMToken.module)
        let held = try PKCS11PrivateKey(
            module: module, name: PKCS11KeyName(token: token.label, object: "apns"), pin: Self.pin)
        let message = Array("header.claims".utf8)
        let signature = try held.signature(forDigest: SHA256.hash(message))
        #expect(signature.count == 64)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        let fromPoint = try P256.Signing.PublicKey(x963Representation: held.publicPoint)
        #expect(fromPoint.pemRepresentation == key.publicKey.pemRepresentation)
        // By id alone, and by both: the same key.
        let byID = try PKCS11PrivateKey(
            module: module, name: PKCS11KeyName(token: token.label, id: [0x01]), pin: Self.pin)
        #expect(byID.publicPoint == held.publicPoint)
    }

    /// On a token no other test logs into: a login holds for every session of the process on that token, and a
    /// token already logged into answers any PIN with CKR_USER_ALREADY_LOGGED_IN.
    @Test func aWrongPINIsRefusedWithoutBeingRepeated() throws {
        let token = try token("wrong-pin")
        let wrong = "wrong-\(UUID().uuidString.prefix(8))"
        let error = try refusal(PKCS11KeyName(token: token.label, object: "apns"), pin: wrong)
        #expect(error.code == .loginFailed)
        #expect(error.reason.contains("PIN is wrong"))
        #expect(!error.description.contains(wrong) && !error.description.contains(Self.pin))
    }

    /// A process logged into a token (a key of it open) opens the key again with another PIN, as a reload that changed
    /// only the PIN does: the token answers any PIN as already logged in, so the process logs out and in again and the
    /// wrong PIN is refused; the key already open still signs (logging in again with its own PIN), and the right PIN
    /// opens the key again.
    @Test func aWrongPINIsRefusedWhileTheTokenIsLoggedInto() throws {
        let (token, software) = try SharedSoftHSM.token("pin-change", pin: Self.pin)
        let key = try #require(software)
        let module = try PKCS11Module.load(path: SoftHSMToken.module)
        let name = PKCS11KeyName(token: token.label, object: "apns")
        let running = try PKCS11PrivateKey(module: module, name: name, pin: Self.pin)
        let wrong = "wrong-\(UUID().uuidString.prefix(8))"
        let error = try refusal(name, pin: wrong)
        #expect(error.code == .loginFailed)
        #expect(error.reason == "token \"pin-change\" refused the login: the PIN is wrong (APNS_PKCS11_PIN)")
        #expect(!error.description.contains(wrong) && !error.description.contains(Self.pin))
        let message = Array("header.claims".utf8)
        #expect(key.publicKey.isValidSignature(try running.signature(forDigest: SHA256.hash(message)), for: message))
        let reopened = try PKCS11PrivateKey(module: module, name: name, pin: Self.pin)
        #expect(reopened.publicPoint == running.publicPoint)
        #expect(key.publicKey.isValidSignature(try reopened.signature(forDigest: SHA256.hash(message)), for: message))
        #expect(key.publicKey.isValidSignature(try running.signature(forDigest: SHA256.hash(message)), for: message))
    }

    @Test func aMissingObjectIsRefused() throws {
        let token = try token("signs")
        let error = try refusal(PKCS11KeyName(token: token.label, object: "elsewhere"))
        #expect(error.code == .noKey)
        #expect(error.reason.contains("object \"elsewhere\""))
    }

    @Test func twoMatchingKeysAreRefused() throws {
        let token = try token("several")
        let error = try refusal(PKCS11KeyName(token: token.label, object: "apns"))
        #expect(error.code == .severalKeys)
        #expect(error.reason.contains("2 private keys"))
    }

    @Test func anRSAKeyIsRefused() throws {
        let token = try token("rsa")
        let error = try refusal(PKCS11KeyName(token: token.label, object: "apns"))
        #expect(error.code == .wrongKeyType)
        #expect(error.reason.contains("RSA"))
    }

    @Test func anUnknownTokenIsRefused() throws {
        _ = try token("signs")
        let error = try refusal(PKCS11KeyName(token: "no-such-token", object: "apns"))
        #expect(error.code == .noToken)
        #expect(error.reason.contains("no-such-token"))
    }

    @Test func aLibraryThatIsNoModuleAndAMissingFileAreRefused() throws {
        _ = try token("signs")
        let notAModule = try #require(
            [
                "/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1",
                "/lib/aarch64-linux-gnu/libz.so.1",
            ]
            .first { FileManager.default.fileExists(atPath: $0) })
        #expect(throws: PKCS11Error(.notAModule, "")) { try PKCS11Module.load(path: notAModule) }
        #expect(throws: PKCS11Error(.unloadable, "")) { try PKCS11Module.load(path: "/nonexistent/libpkcs11.so") }
    }

    private func refusal(_ name: PKCS11KeyName, pin: String = pin) throws -> PKCS11Error {
        let module = try PKCS11Module.load(path: SoftHSMToken.module)
        do {
            _ = try PKCS11PrivateKey(module: module, name: name, pin: pin)
        } catch {
            return error
        }
        throw TestFailure("\(name) was opened")
    }
}

/// The one SoftHSM directory of this test process, every token made in it before the module is first loaded:
/// SoftHSM reads its configuration and finds its tokens at C_Initialize, once per process.
enum SharedSoftHSM {
    /// The scenarios' tokens, made on first use, and the software keys imported into them.
    struct Tokens: Sendable {
        var byName: [String: SoftHSMToken] = [:]
        var keys: [String: P256.Signing.PrivateKey] = [:]
    }

    private static let made = Mutex<Result<Tokens, TestFailure>?>(nil)

    /// The token made for `scenario`: "signs" (a P-256 key, object apns, id 01), "several" (two P-256 keys
    /// labelled apns), "rsa" (an RSA key labelled apns), "wrong-pin" (a P-256 key, object apns, that no test logs
    /// into with the right PIN), "pin-change" (a P-256 key, object apns, logged into and then given a wrong PIN).
    static func token(_ scenario: String, pin: String) throws -> (SoftHSMToken, P256.Signing.PrivateKey?) {
        let tokens = try made.withLock { made -> Result<Tokens, TestFailure> in
            if let made { return made }
            let result = Result { () throws(TestFailure) -> Tokens in
                do { return try makeTokens(pin: pin) } catch { throw TestFailure("SoftHSM: \(error)") }
            }
            made = result
            return result
        }.get()
        return (tokens.byName[scenario]!, tokens.keys[scenario])
    }

    private static func makeTokens(pin: String) throws -> Tokens {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "duo-relay-softhsm-\(UUID().uuidString)")
        var tokens = Tokens()
        for name in ["signs", "several", "rsa", "wrong-pin", "pin-change"] {
            tokens.byName[name] = try SoftHSMToken(label: name, pin: pin, in: directory)
        }
        let key = P256.Signing.PrivateKey()
        try tokens.byName["signs"]!.importKey(pem: key.pemRepresentation, object: "apns", id: "01")
        tokens.keys["signs"] = key
        let pinChange = P256.Signing.PrivateKey()
        try tokens.byName["pin-change"]!.importKey(pem: pinChange.pemRepresentation, object: "apns", id: "01")
        tokens.keys["pin-change"] = pinChange
        try tokens.byName["wrong-pin"]!.importKey(
            pem: P256.Signing.PrivateKey().pemRepresentation, object: "apns", id: "01")
        try tokens.byName["several"]!.importKey(
            pem: P256.Signing.PrivateKey().pemRepresentation, object: "apns", id: "01")
        try tokens.byName["several"]!.importKey(
            pem: P256.Signing.PrivateKey().pemRepresentation, object: "apns", id: "02")
        try tokens.byName["rsa"]!.importRSAKey(object: "apns", id: "01")
        setenv("SOFTHSM2_CONF", tokens.byName["signs"]!.configuration, 1)
        return tokens
    }
}
