import Foundation

/// The simulator's CA and server certificate kept in a directory across restarts (`apns-sim --ca-dir`): made
/// on first use, read back at every later start, so that relays trusting `ca.pem` keep trusting the simulator
/// after it restarts. The files: `ca.pem` (what relays trust, `apns.ca_file`), `server.pem` and
/// `server-key.pem` (mode 0600). The certificates are valid for thirty days from when they were made
/// (``SimulatorPKI``); removing the directory's files makes new ones.
public enum SimulatorCADirectory {
    public static let caFile = "ca.pem"
    public static let certificateFile = "server.pem"
    public static let privateKeyFile = "server-key.pem"

    /// What the simulator serves and whether it was made now.
    public struct Kept: Sendable {
        /// The CA certificate relays trust, and the server certificate and key the simulator serves (PEM).
        public var caCertificatePEM: String
        public var certificatePEM: String
        public var privateKeyPEM: String
        /// Whether they were made now (first use), not read back.
        public var made: Bool
        public var caPath: String
    }

    public struct Problem: Error, CustomStringConvertible, Equatable {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Reads the CA and server certificate kept in `directory`, or makes them (and the directory) when it holds
    /// none of the three files. Some but not all of them is a problem, as is a file that cannot be read or written.
    public static func load(_ directory: String) throws(Problem) -> Kept {
        let paths = [caFile, certificateFile, privateKeyFile].map { (directory as NSString).appendingPathComponent($0) }
        let present = paths.filter { FileManager.default.fileExists(atPath: $0) }
        if present.count == paths.count {
            guard let texts = try? paths.map({ try String(contentsOfFile: $0, encoding: .utf8) }) else {
                throw Problem("--ca-dir: the files in \(directory) cannot be read")
            }
            return Kept(
                caCertificatePEM: texts[0], certificatePEM: texts[1], privateKeyPEM: texts[2], made: false,
                caPath: paths[0])
        }
        guard present.isEmpty else {
            throw Problem(
                "--ca-dir: \(directory) holds "
                    + present.map { ($0 as NSString).lastPathComponent }.joined(separator: ", ")
                    + " but not all of \(caFile), \(certificateFile) and \(privateKeyFile): "
                    + "remove them to make new ones"
            )
        }
        let pki: SimulatorPKI
        do {
            pki = try SimulatorPKI.generate()
        } catch {
            throw Problem("--ca-dir: cannot make a CA: \(error)")
        }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            // The key first, created private: never readable by others, not even for a moment.
            guard
                FileManager.default.createFile(
                    atPath: paths[2], contents: Data(pki.privateKeyPEM.utf8), attributes: [.posixPermissions: 0o600])
            else { throw Problem("--ca-dir: cannot write \(paths[2])") }
            try pki.certificatePEM.write(toFile: paths[1], atomically: true, encoding: .utf8)
            try pki.caCertificatePEM.write(toFile: paths[0], atomically: true, encoding: .utf8)
        } catch let problem as Problem {
            throw problem
        } catch {
            throw Problem("--ca-dir: cannot write to \(directory)")
        }
        return Kept(
            caCertificatePEM: pki.caCertificatePEM, certificatePEM: pki.certificatePEM,
            privateKeyPEM: pki.privateKeyPEM, made: true, caPath: paths[0])
    }
}
