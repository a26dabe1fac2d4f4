import Foundation
import Testing

@testable import TLS

/// The relay front's context (docs/DESIGN.md, "TLS"): which pairs it takes, what it says of the leaf, and the words
/// of each refusal. Keys and certificates are made by the `openssl` command, as an operator's tools would.
@Suite struct FrontContextTests {
    static let now = Int64(Date().timeIntervalSince1970)

    /// Runs `openssl` with `arguments` in `directory`; its standard output.
    @discardableResult
    static func openssl(_ arguments: [String], in directory: URL) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "openssl \(arguments)")
        return text
    }

    /// A self-signed certificate for `localhost` with a key made by `keyArguments` (`genpkey` options); its PEM
    /// texts.
    static func pair(_ keyArguments: [String], encrypted: Bool = false) throws -> (certificate: String, key: String) {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory() + "duo-relay-front-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try openssl(["genpkey"] + keyArguments + ["-out", "key.pem"], in: directory)
        try openssl(
            ["req", "-x509", "-key", "key.pem", "-out", "cert.pem", "-subj", "/CN=localhost", "-days", "30"],
            in: directory)
        if encrypted {
            try openssl(
                ["pkey", "-in", "key.pem", "-aes256", "-passout", "pass:secret", "-out", "encrypted.pem"], in: directory
            )
        }
        return (
            try String(contentsOf: directory.appendingPathComponent("cert.pem"), encoding: .utf8),
            try String(
                contentsOf: directory.appendingPathComponent(encrypted ? "encrypted.pem" : "key.pem"), encoding: .utf8)
        )
    }

    static func refusal(_ certificate: String, _ key: String) -> String? {
        do {
            _ = try TLSServerContext(httpFrontChainPEM: certificate, privateKeyPEM: key, now: now)
            return nil
        } catch {
            return error.reason
        }
    }

    @Test(arguments: [
        ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
        ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"],
        ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
    ])
    func theKeysEveryClientVerifiesAreTaken(_ key: [String]) throws {
        let pair = try Self.pair(key)
        #expect(Self.refusal(pair.certificate, pair.key) == nil)
    }

    @Test(arguments: [
        (
            ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"],
            "the key is RSA of 1024 bits: at least 2048 are needed"
        ),
        (
            ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-521"],
            "the key is ECDSA on secp521r1: P-256 or P-384 is needed"
        ),
        (["-algorithm", "ED25519"], "the key is neither ECDSA (P-256, P-384) nor RSA"),
    ])
    func otherKeysAreRefusedInWords(_ key: [String], _ reason: String) throws {
        let pair = try Self.pair(key)
        #expect(Self.refusal(pair.certificate, pair.key) == reason)
    }

    /// An encrypted key is refused, never prompted for: nothing reads a password from a terminal.
    @Test func anEncryptedKeyIsRefusedWithoutAPrompt() throws {
        let pair = try Self.pair(["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], encrypted: true)
        #expect(pair.key.contains("ENCRYPTED"))
        #expect(
            Self.refusal(pair.certificate, pair.key)?.hasPrefix("the key file holds no unencrypted PEM private key")
                == true)
    }

    @Test func aKeyOfAnotherCertificateAndAnEmptyFileAreRefused() throws {
        let one = try LocalPKI.generate()
        let other = try LocalPKI.generate()
        #expect(
            Self.refusal(one.certificatePEM, other.privateKeyPEM) == "the private key does not match the certificate")
        #expect(Self.refusal("", one.privateKeyPEM) == "the certificate file holds no PEM certificate")
        #expect(Self.refusal(one.certificatePEM, "") != nil)
    }

    @Test func anExpiredCertificateIsRefusedWithItsDate() throws {
        let expired = try LocalPKI.generate(validDays: -1)
        let reason = Self.refusal(expired.certificatePEM, expired.privateKeyPEM)
        #expect(
            reason?.hasPrefix("the certificate expired on ") == true && reason?.hasSuffix("Z") == true,
            "\(reason ?? "")")
    }

    /// The summary of the leaf (not the chain after it) as `openssl x509` reads it.
    @Test func theLeafIsSummarizedAsOpenSSLReadsIt() throws {
        let pki = try LocalPKI.generate()
        let context = try TLSServerContext(
            httpFrontChainPEM: pki.certificatePEM + pki.caCertificatePEM, privateKeyPEM: pki.privateKeyPEM,
            now: Self.now)
        let directory = URL(fileURLWithPath: NSTemporaryDirectory())
        let file = directory.appendingPathComponent("duo-relay-leaf-\(UUID().uuidString).pem")
        try pki.certificatePEM.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let printed = try Self.openssl(
            ["x509", "-in", file.path, "-noout", "-fingerprint", "-sha256", "-enddate", "-dateopt", "iso_8601"],
            in: directory)
        #expect(printed.contains("Fingerprint=\(context.leaf.fingerprint)\n"), "\(printed)")
        #expect(context.leaf.subject == "CN=localhost")
        // openssl prints `notAfter=2027-01-04 15:13:26Z`.
        #expect(printed.contains("notAfter=" + context.leaf.expiryText.replacingOccurrences(of: "T", with: " ")))
        #expect(context.leaf.notAfter > Self.now + 29 * 86_400)
    }
}
