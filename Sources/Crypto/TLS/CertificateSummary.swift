import COpenSSL
import Glibc

/// What an operator is told of a served certificate (the start-up summary, the `reloaded:` line, `check`, the expiry
/// metric): its subject, when it expires and its SHA-256 fingerprint. None of them is a secret.
public struct CertificateSummary: Sendable, Equatable {
    /// The subject as RFC 2253 writes it (`CN=relay.example.org`).
    public let subject: String
    /// The end of its validity (notAfter), in Unix seconds.
    public let notAfter: Int64
    /// The SHA-256 of its DER encoding as `openssl x509 -fingerprint -sha256` prints it (`AB:CD:…`).
    public let fingerprint: String

    /// The expiry as RFC 3339 UTC (`2027-03-04T12:00:00Z`).
    public var expiryText: String {
        var time = time_t(notAfter)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { return "\(notAfter)" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):"
            + "\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }

    /// `subject …, expires …, SHA-256 …`: the words every line uses.
    public var description: String {
        "subject \(subject), expires \(expiryText), SHA-256 \(fingerprint)"
    }

    /// A context's summary before its certificate is read.
    static let none = CertificateSummary(subject: "", notAfter: 0, fingerprint: "")

    init(subject: String, notAfter: Int64, fingerprint: String) {
        self.subject = subject
        self.notAfter = notAfter
        self.fingerprint = fingerprint
    }

    /// Reads `certificate` (an `X509`, not taken over).
    init(_ certificate: OpaquePointer) throws(TLSError) {
        var parts = tm()
        guard let end = X509_get0_notAfter(certificate), ASN1_TIME_to_tm(end, &parts) == 1 else {
            OpenSSLErrorQueue.clear()
            throw TLSError(.invalidCertificate, "the certificate's expiry cannot be read")
        }
        notAfter = Int64(timegm(&parts))
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard X509_digest(certificate, EVP_sha256(), &digest, &length) == 1 else {
            throw TLSError.openSSL("the certificate's fingerprint cannot be computed")
        }
        let hex = Array("0123456789ABCDEF")
        fingerprint = digest.prefix(Int(length)).map { String([hex[Int($0 >> 4)], hex[Int($0 & 15)]]) }
            .joined(separator: ":")
        subject = Self.name(X509_get_subject_name(certificate))
    }

    /// An X.509 name as RFC 2253 text.
    private static func name(_ name: OpaquePointer?) -> String {
        guard let name, let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, COpenSSL_XN_FLAG_RFC2253) >= 0 else { return "" }
        var data: UnsafeMutablePointer<CChar>?
        // BIO_get_mem_data is a macro over BIO_ctrl(BIO_CTRL_INFO).
        let length = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data)
        guard length > 0, let data else { return "" }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }
}
