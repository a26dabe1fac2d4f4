import Foundation
import RelayCrypto
import Testing

@Suite("P-256 keys and ES256 signatures")
struct P256SigningTests {
    static let p256Arguments = [
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "key.pem",
    ]

    @Test("a signature made here verifies with the openssl command")
    func signatureVerifiedByOpenSSL() throws {
        let tool = try OpenSSLTool()
        try tool.succeed(Self.p256Arguments)
        try tool.succeed(["pkey", "-in", "key.pem", "-pubout", "-out", "pub.pem"])
        let key = try P256.Signing.PrivateKey(pemRepresentation: try tool.readText("key.pem"))
        let data = Array("push relay signing input".utf8)
        let raw = try key.signature(for: data)
        #expect(raw.count == 64)
        try tool.write("data", data)
        try tool.write("sig.der", DERSignature.encode(raw: raw))
        let verified = try tool.run(["dgst", "-sha256", "-verify", "pub.pem", "-signature", "sig.der", "data"])
        #expect(verified.status == 0)
        #expect(verified.output.contains("Verified OK"))

        // The same check must fail for other data: the openssl check is not vacuous.
        try tool.write("other", Array("push relay signing inpuT".utf8))
        let rejected = try tool.run(["dgst", "-sha256", "-verify", "pub.pem", "-signature", "sig.der", "other"])
        #expect(rejected.status != 0)
    }

    @Test("a signature made by the openssl command verifies here")
    func openSSLSignatureVerifiedHere() throws {
        let tool = try OpenSSLTool()
        try tool.succeed(Self.p256Arguments)
        try tool.succeed(["pkey", "-in", "key.pem", "-pubout", "-out", "pub.pem"])
        let data = Array("{\"alg\":\"ES256\"}.{\"iss\":\"TEAM\"}".utf8)
        try tool.write("data", data)
        try tool.succeed(["dgst", "-sha256", "-sign", "key.pem", "-out", "sig.der", "data"])
        let raw = try #require(DERSignature.decodeToRaw(try tool.read("sig.der")))
        let publicKey = try P256.Signing.PublicKey(pemRepresentation: try tool.readText("pub.pem"))
        #expect(publicKey.isValidSignature(raw, for: data))
        #expect(!publicKey.isValidSignature(raw, for: data.dropLast()))

        // The private key read from the same file derives the same public key.
        let privateKey = try P256.Signing.PrivateKey(pemRepresentation: try tool.readText("key.pem"))
        #expect(privateKey.publicKey.pemRepresentation == (try tool.readText("pub.pem")))
        #expect(privateKey.publicKey.isValidSignature(raw, for: data))
    }

    @Test("a generated key's PEM is PKCS#8 that openssl reads back to the same public key")
    func generatedKeyExportsPKCS8() throws {
        let key = P256.Signing.PrivateKey()
        let pem = key.pemRepresentation
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        #expect(pem.hasSuffix("-----END PRIVATE KEY-----\n"))
        let tool = try OpenSSLTool()
        try tool.write("key.pem", pem)
        try tool.succeed(["pkey", "-in", "key.pem", "-pubout", "-out", "pub.pem"])
        #expect(try tool.readText("pub.pem") == key.publicKey.pemRepresentation)
        #expect(key.publicKey.pemRepresentation.hasPrefix("-----BEGIN PUBLIC KEY-----\n"))

        let reread = try P256.Signing.PrivateKey(pemRepresentation: pem)
        #expect(reread.pemRepresentation == pem)
        let signature = try reread.signature(for: [1, 2, 3])
        #expect(key.publicKey.isValidSignature(signature, for: [1, 2, 3] as [UInt8]))
    }

    @Test("signatures verify only with the right key, data and bytes")
    func verification() throws {
        let key = P256.Signing.PrivateKey()
        let other = P256.Signing.PrivateKey()
        let data = Data("message".utf8)
        let signature = try key.signature(for: data)
        #expect(key.publicKey.isValidSignature(signature, for: data))
        #expect(!other.publicKey.isValidSignature(signature, for: data))
        #expect(try key.signature(for: data) != signature, "ECDSA signatures are randomized")
        for index in [0, 31, 32, 63] {
            var flipped = signature
            flipped[index] ^= 0x01
            #expect(!key.publicKey.isValidSignature(flipped, for: data))
        }
        #expect(!key.publicKey.isValidSignature(signature.dropLast(), for: data))
        #expect(!key.publicKey.isValidSignature(signature + [0], for: data))
        #expect(!key.publicKey.isValidSignature([UInt8](repeating: 0, count: 64), for: data))
        #expect(!key.publicKey.isValidSignature([UInt8](repeating: 0xFF, count: 64), for: data))
        #expect(!key.publicKey.isValidSignature([UInt8](), for: data))
        // A public key parsed from its own PEM behaves the same.
        let parsed = try P256.Signing.PublicKey(pemRepresentation: key.publicKey.pemRepresentation)
        #expect(parsed.isValidSignature(signature, for: data))
    }

    @Test(
        "keys that are not P-256 are rejected with wrongKeyType",
        arguments: [
            ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "key.pem"],
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", "key.pem"],
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:secp256k1", "-out", "key.pem"],
            ["genpkey", "-algorithm", "ED25519", "-out", "key.pem"],
        ])
    func wrongKeyType(_ generate: [String]) throws {
        let tool = try OpenSSLTool()
        try tool.succeed(generate)
        try tool.succeed(["pkey", "-in", "key.pem", "-pubout", "-out", "pub.pem"])
        let privatePEM = try tool.readText("key.pem")
        let publicPEM = try tool.readText("pub.pem")
        #expect(throws: CryptoError(.wrongKeyType, "")) { try P256.Signing.PrivateKey(pemRepresentation: privatePEM) }
        #expect(throws: CryptoError(.wrongKeyType, "")) { try P256.Signing.PublicKey(pemRepresentation: publicPEM) }
    }

    @Test("the traditional EC PEM form of a P-256 key is accepted")
    func traditionalECForm() throws {
        let tool = try OpenSSLTool()
        try tool.succeed(Self.p256Arguments)
        try tool.succeed(["ec", "-in", "key.pem", "-out", "traditional.pem"])
        let traditional = try tool.readText("traditional.pem")
        #expect(traditional.contains("BEGIN EC PRIVATE KEY"))
        let key = try P256.Signing.PrivateKey(pemRepresentation: traditional)
        #expect(key.pemRepresentation == (try tool.readText("key.pem")))
    }

    @Test(
        "text that is not a PEM key is rejected with invalidPEM",
        arguments: [
            "", "garbage", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n",
        ])
    func invalidPEM(_ text: String) {
        #expect(throws: CryptoError(.invalidPEM, "")) { try P256.Signing.PrivateKey(pemRepresentation: text) }
        #expect(throws: CryptoError(.invalidPEM, "")) { try P256.Signing.PublicKey(pemRepresentation: text) }
    }

    @Test("a public key PEM is not a private key and vice versa")
    func publicPrivateMixup() {
        let key = P256.Signing.PrivateKey()
        #expect(throws: CryptoError(.invalidPEM, "")) {
            try P256.Signing.PrivateKey(pemRepresentation: key.publicKey.pemRepresentation)
        }
        #expect(throws: CryptoError(.invalidPEM, "")) {
            try P256.Signing.PublicKey(pemRepresentation: key.pemRepresentation)
        }
    }

    @Test("an encrypted private key is rejected without prompting for a password")
    func encryptedKey() throws {
        let tool = try OpenSSLTool()
        try tool.succeed(Self.p256Arguments)
        try tool.succeed(["pkcs8", "-topk8", "-in", "key.pem", "-out", "enc.pem", "-passout", "pass:secret"])
        let encrypted = try tool.readText("enc.pem")
        #expect(encrypted.contains("ENCRYPTED PRIVATE KEY"))
        #expect(throws: CryptoError(.invalidPEM, "")) { try P256.Signing.PrivateKey(pemRepresentation: encrypted) }
    }

    @Test("one key signs and verifies from many tasks at once")
    func concurrentUse() async throws {
        let key = P256.Signing.PrivateKey()
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for round in 0..<25 {
                        let data = Array("task \(task) round \(round)".utf8)
                        let signature = try key.signature(for: data)
                        if !key.publicKey.isValidSignature(signature, for: data) { return false }
                    }
                    return true
                }
            }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: true, count: 8))
    }
}
