import Foundation

/// A throwaway CA and a server certificate for 127.0.0.1 and localhost, made with /usr/bin/openssl
/// once per test process, a second one from the same CA for another name only, and an unrelated
/// CA that trusts nothing of ours.
struct TestPKI: Sendable {
    let directory: String
    var caFile: String { directory + "/ca.pem" }
    var otherCAFile: String { directory + "/other-ca.pem" }
    var serverKey: String { directory + "/server.key" }
    var serverCertificate: String { directory + "/server.pem" }
    /// Issued by `caFile` with the server's key, for `elsewhere.example` only.
    var elsewhereCertificate: String { directory + "/elsewhere.pem" }

    static let shared: TestPKI = {
        let directory = NSTemporaryDirectory() + "http2client-pki-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try! FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let pki = TestPKI(directory: directory)
        try! """
        subjectAltName = IP:127.0.0.1, DNS:localhost
        basicConstraints = CA:FALSE
        extendedKeyUsage = serverAuth
        """.write(toFile: directory + "/server.ext", atomically: true, encoding: .utf8)
        for name in ["ca", "other-ca"] {
            run([
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).pem", "-days", "2",
                "-subj", "/CN=HTTP2Client test \(name)",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ])
        }
        run([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", pki.serverKey,
            "-out", directory + "/server.csr", "-subj", "/CN=127.0.0.1",
        ])
        run([
            "x509", "-req", "-in", directory + "/server.csr", "-CA", pki.caFile, "-CAkey", directory + "/ca.key",
            "-CAcreateserial", "-out", pki.serverCertificate, "-days", "2", "-extfile", directory + "/server.ext",
        ])
        try! "subjectAltName = DNS:elsewhere.example\nextendedKeyUsage = serverAuth\n".write(
            toFile: directory + "/elsewhere.ext", atomically: true, encoding: .utf8)
        run([
            "x509", "-req", "-in", directory + "/server.csr", "-CA", pki.caFile, "-CAkey", directory + "/ca.key",
            "-CAcreateserial", "-out", pki.elsewhereCertificate, "-days", "2", "-extfile", directory + "/elsewhere.ext",
        ])
        return pki
    }()

    private static func run(_ arguments: [String]) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try! process.run()
        process.waitUntilExit()
        precondition(process.terminationStatus == 0, "openssl \(arguments.first ?? "") failed")
    }
}
