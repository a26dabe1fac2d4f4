import COpenSSL
import Foundation

/// A throwaway certificate authority and a server certificate it signed, for a local server (the APNs simulator's,
/// the tests').
///
/// Both keys are P-256. The CA certificate is what a client trusts (for example `curl --cacert`);
/// the server certificate and its key go into a ``TLSServerContext``.
public struct LocalPKI: Sendable {
    /// The CA certificate (PEM), to be trusted by clients.
    public let caCertificatePEM: String
    /// The server certificate (PEM), signed by the CA, with the requested hosts as subject alternative names.
    public let certificatePEM: String
    /// The server certificate's private key (PKCS #8 PEM).
    public let privateKeyPEM: String

    /// Generates a fresh CA and a server certificate for `hosts`.
    ///
    /// Each host becomes an IP address entry when it parses as IPv4 or IPv6, otherwise a DNS entry.
    /// Both certificates are valid from one day ago to thirty days ahead.
    public static func generate(hosts: [String] = ["localhost", "127.0.0.1", "::1"]) throws(TLSError) -> LocalPKI {
        try generate(hosts: hosts, validDays: 30)
    }

    /// ``generate(hosts:)`` with a validity of `validDays` ahead (a negative count: a certificate that expired that
    /// many days ago, valid for the day before it).
    public static func generate(hosts: [String] = ["localhost", "127.0.0.1", "::1"], validDays: Int) throws(TLSError)
        -> LocalPKI
    {
        let validity = (notBefore: min(-86_400, (validDays - 1) * 86_400), notAfter: validDays * 86_400)
        let caKey = try makeP256Key()
        defer { EVP_PKEY_free(caKey) }
        let serverKey = try makeP256Key()
        defer { EVP_PKEY_free(serverKey) }

        let ca = try makeCertificate(
            commonName: "duo-relay APNs simulator CA", publicKey: caKey, issuer: nil, signingKey: caKey,
            validity: validity,
            extensions: [
                (NID_basic_constraints, "critical,CA:TRUE"),
                (NID_key_usage, "critical,keyCertSign,cRLSign"),
                (NID_subject_key_identifier, "hash"),
            ])
        defer { X509_free(ca) }

        let alternativeNames = hosts.map { isIPAddress($0) ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
        var serverExtensions: [(Int32, String)] = [
            (NID_basic_constraints, "critical,CA:FALSE"),
            (NID_key_usage, "critical,digitalSignature"),
            (NID_ext_key_usage, "serverAuth"),
            (NID_subject_key_identifier, "hash"),
            (NID_authority_key_identifier, "keyid"),
        ]
        if !alternativeNames.isEmpty {
            serverExtensions.append((NID_subject_alt_name, alternativeNames))
        }
        let server = try makeCertificate(
            commonName: hosts.first ?? "localhost", publicKey: serverKey, issuer: ca, signingKey: caKey,
            validity: validity,
            extensions: serverExtensions)
        defer { X509_free(server) }

        return LocalPKI(
            caCertificatePEM: try pem { PEM_write_bio_X509($0, ca) },
            certificatePEM: try pem { PEM_write_bio_X509($0, server) },
            privateKeyPEM: try pem { PEM_write_bio_PrivateKey($0, serverKey, nil, nil, 0, nil, nil) })
    }

    private static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// A new P-256 key; the caller frees it with `EVP_PKEY_free`.
    private static func makeP256Key() throws(TLSError) -> OpaquePointer {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw TLSError.openSSL("EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
            EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
            EVP_PKEY_generate(context, &key) == 1, let key
        else {
            throw TLSError.openSSL("P-256 key generation failed")
        }
        return key
    }

    /// A signed X.509 v3 certificate; the caller frees it with `X509_free`.
    /// `issuer == nil` makes it self-signed.
    private static func makeCertificate(
        commonName: String, publicKey: OpaquePointer, issuer: OpaquePointer?, signingKey: OpaquePointer,
        validity: (notBefore: Int, notAfter: Int), extensions: [(Int32, String)]
    ) throws(TLSError) -> OpaquePointer {
        guard let certificate = X509_new() else { throw TLSError.openSSL("X509_new failed") }
        var success = false
        defer { if !success { X509_free(certificate) } }

        guard X509_set_version(certificate, 2) == 1 else { throw TLSError.openSSL("X509_set_version failed") }
        // A random positive 127-bit serial number.
        guard let serial = BN_new() else { throw TLSError.openSSL("BN_new failed") }
        defer { BN_free(serial) }
        guard BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1,
            BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(certificate)) != nil
        else { throw TLSError.openSSL("serial number generation failed") }

        guard X509_gmtime_adj(X509_getm_notBefore(certificate), validity.notBefore) != nil,
            X509_gmtime_adj(X509_getm_notAfter(certificate), validity.notAfter) != nil
        else { throw TLSError.openSSL("setting the validity failed") }

        guard X509_set_pubkey(certificate, publicKey) == 1 else {
            throw TLSError.openSSL("X509_set_pubkey failed")
        }
        let name = X509_get_subject_name(certificate)
        guard X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1 else {
            throw TLSError.openSSL("setting the common name failed")
        }
        let issuerName = issuer.map { X509_get_subject_name($0) } ?? name
        guard X509_set_issuer_name(certificate, issuerName) == 1 else {
            throw TLSError.openSSL("X509_set_issuer_name failed")
        }

        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer ?? certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions {
            guard let extensionValue = X509V3_EXT_nconf_nid(nil, &context, nid, value) else {
                throw TLSError.openSSL("building extension \(nid) failed")
            }
            defer { X509_EXTENSION_free(extensionValue) }
            guard X509_add_ext(certificate, extensionValue, -1) == 1 else {
                throw TLSError.openSSL("adding extension \(nid) failed")
            }
        }

        guard X509_sign(certificate, signingKey, EVP_sha256()) > 0 else {
            throw TLSError.openSSL("X509_sign failed")
        }
        success = true
        return certificate
    }

    /// Runs `write` against a memory BIO and returns what it wrote.
    private static func pem(_ write: (OpaquePointer) -> Int32) throws(TLSError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw TLSError.openSSL("BIO_new failed") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw TLSError.openSSL("PEM encoding failed") }
        var data: UnsafeMutablePointer<CChar>?
        // BIO_get_mem_data is a macro over BIO_ctrl(BIO_CTRL_INFO).
        let length = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data)
        guard length > 0, let data else { throw TLSError.openSSL("reading the PEM buffer failed") }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }
}
