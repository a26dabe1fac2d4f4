import Foundation

/// A SoftHSM token for a test (Debian's softhsm2, installed by `scripts/install-deps --test`): a directory of its own
/// with its `softhsm2.conf` (named by `SOFTHSM2_CONF`), a token initialised there, and keys imported with
/// `softhsm2-util --import`. Tests that cannot find the module fail: the tool is a test dependency, never skipped.
public struct SoftHSMToken: Sendable {
    /// Debian's SoftHSM module.
    public static let module = "/usr/lib/softhsm/libsofthsm2.so"
    static let util = "/usr/bin/softhsm2-util"

    /// The directory holding the configuration and the token store.
    public let directory: URL
    public let label: String
    public let pin: String

    /// The configuration file SoftHSM reads (`SOFTHSM2_CONF`).
    public var configuration: String { directory.appendingPathComponent("softhsm2.conf").path }
    /// Where the token's files are.
    public var tokens: URL { directory.appendingPathComponent("tokens") }
    /// What a process that uses this token needs in its environment.
    public var environment: [String: String] { ["SOFTHSM2_CONF": configuration] }

    /// A token labelled `label` with user PIN `pin`, in `directory` (made, with its configuration, if new; several
    /// tokens may share one directory: a process reads one SoftHSM configuration, at its module's C_Initialize).
    public init(label: String = "duo-relay", pin: String, in directory: URL? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.util),
            FileManager.default.fileExists(atPath: Self.module)
        else {
            throw TestFailure("softhsm2 is not installed: run scripts/install-deps --test")
        }
        let directory =
            directory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("duo-relay-softhsm-\(UUID().uuidString)")
        self.directory = directory
        self.label = label
        self.pin = pin
        try FileManager.default.createDirectory(at: tokens, withIntermediateDirectories: true)
        try """
        directories.tokendir = \(tokens.path)
        objectstore.backend = file
        log.level = ERROR
        slots.removable = false

        """.write(toFile: configuration, atomically: true, encoding: .utf8)
        try run(["--init-token", "--free", "--label", label, "--pin", pin, "--so-pin", "so-" + pin])
    }

    /// The same token with another PIN: what a relay given the wrong PIN is told.
    public init(copying token: SoftHSMToken, pin: String) {
        directory = token.directory
        label = token.label
        self.pin = pin
    }

    /// Imports a private key (PKCS#8 PEM, as Apple's .p8 is) as object `object` with id `id` (hex), with its public
    /// key object beside it (same label and id). The PEM goes through a file of the test's, removed at once.
    public func importKey(pem: String, object: String, id: String) throws {
        let file = directory.appendingPathComponent("import-\(UUID().uuidString).pem")
        try pem.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        try run(["--import", file.path, "--token", label, "--label", object, "--id", id, "--pin", pin])
    }

    /// Imports a fresh RSA key (2048 bits, made by openssl) as `object` with id `id`.
    public func importRSAKey(object: String, id: String) throws {
        let made = try Tool.run(
            "/usr/bin/openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
        guard made.status == 0 else { throw TestFailure("openssl genpkey failed: \(made.errors)") }
        try importKey(pem: made.output, object: object, id: id)
    }

    private func run(_ arguments: [String]) throws {
        let result = try Tool.run(Self.util, arguments, environment: environment)
        guard result.status == 0 else {
            throw TestFailure("softhsm2-util \(arguments.first ?? "") failed: \(result.output) \(result.errors)")
        }
    }

    /// Removes the directory.
    public func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
