import Foundation
import RelayCore
import TLS

/// The `tls` pair read from its files (docs/DESIGN.md, "TLS"), as `serve` reads it at start and on SIGHUP and as
/// `check` validates it: readable, parses, matches, not expired, and a key file no other user can read. A problem
/// names `tls` (or the file's key) and says what is wrong, never anything of the key.
public enum FrontCertificate {
    /// Under this many days to its expiry, `check` warns (and the shipped alert fires).
    public static let warningDays: Int64 = 14

    /// The server context for the pair at `files`, checked at `now` (Unix seconds).
    public static func load(_ files: RelayConfiguration.TLSFiles, now: Int64) throws(ConfigurationError)
        -> TLSServerContext
    {
        let certificate = try read(files.certificateFile, key: "tls.certificate_file")
        try requirePrivate(files.keyFile)
        let key = try read(files.keyFile, key: "tls.key_file")
        do {
            return try TLSServerContext(httpFrontChainPEM: certificate, privateKeyPEM: key, now: now)
        } catch {
            throw ConfigurationError(.invalid, "tls", error.reason)
        }
    }

    /// `check`'s words for a pair that loads: its summary, and a warning when it expires within ``warningDays``.
    public static func describe(_ leaf: CertificateSummary, now: Int64) -> (summary: String, warning: String?) {
        let left = leaf.notAfter - now
        let warning =
            left < warningDays * 86_400
            ? "the tls certificate expires in \(left / 86_400) days (\(leaf.expiryText)): renew it before then" : nil
        return ("tls: certificate " + leaf.description, warning)
    }

    private static func read(_ path: String, key: String) throws(ConfigurationError) -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
            let data = FileManager.default.contents(atPath: path)
        else {
            throw ConfigurationError(.unreadable, key, "names a file that cannot be read")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// The key file must not be readable by every user (a group the relay's user is in may read it: the
    /// `ssl-cert` group's way, or a credential a service manager hands over).
    private static func requirePrivate(_ path: String) throws(ConfigurationError) {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw ConfigurationError(.unreadable, "tls.key_file", "names a file that cannot be read")
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o004 == 0 else {
            throw ConfigurationError(
                .invalid, "tls.key_file",
                "is readable by every user (mode \(String(mode, radix: 8))): make it readable by the relay's user "
                    + "only (chmod 600) or its group (chmod 640)")
        }
    }
}
