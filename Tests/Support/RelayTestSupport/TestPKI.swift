import APNsSimulator
import Foundation

/// The tests' certificates, made with ``SimulatorPKI`` once per test process and written to files for
/// the servers and clients that read them (the simulator, redis-server, the relay's `ca_file`).
///
/// - the CA (`caFile`) and a server certificate for localhost, 127.0.0.1 and ::1 (`serverCertificate`,
///   `serverKey`, and the same as PEM text in `pem`);
/// - `otherCAFile`, a CA that signed nothing here, so a client trusting only it refuses every server;
/// - `elsewhereCertificate` for `elsewhere.example` only, whose CA `bothCAsFile` trusts beside ours:
///   a client trusting that file verifies the chain and can refuse it for its name alone.
public struct TestPKI: Sendable {
    public let directory: String
    public let pem: SimulatorPKI
    public var caFile: String { directory + "/ca.pem" }
    public var serverKey: String { directory + "/server.key" }
    public var serverCertificate: String { directory + "/server.pem" }
    public var otherCAFile: String { directory + "/other-ca.pem" }
    public var elsewhereKey: String { directory + "/elsewhere.key" }
    public var elsewhereCertificate: String { directory + "/elsewhere.pem" }
    public var bothCAsFile: String { directory + "/both-cas.pem" }

    /// One set for the whole test process (the files live in the temporary directory until it is cleaned).
    public static let shared: TestPKI = {
        do { return try TestPKI() } catch { fatalError("the test PKI could not be made: \(error)") }
    }()

    /// A fresh set in a new temporary directory.
    public init() throws {
        let directory = NSTemporaryDirectory() + "duo-relay-test-pki-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.directory = directory
        pem = try SimulatorPKI.generate()
        let other = try SimulatorPKI.generate()
        let elsewhere = try SimulatorPKI.generate(hosts: ["elsewhere.example"])
        let files = [
            caFile: pem.caCertificatePEM, serverKey: pem.privateKeyPEM, serverCertificate: pem.certificatePEM,
            otherCAFile: other.caCertificatePEM, elsewhereKey: elsewhere.privateKeyPEM,
            elsewhereCertificate: elsewhere.certificatePEM,
            bothCAsFile: pem.caCertificatePEM + elsewhere.caCertificatePEM,
        ]
        for (path, text) in files { try text.write(toFile: path, atomically: true, encoding: .utf8) }
    }
}
