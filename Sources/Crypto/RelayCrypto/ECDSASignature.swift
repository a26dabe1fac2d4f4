import COpenSSL

/// Conversion between OpenSSL's DER ECDSA signatures and JOSE's raw r‖s (RFC 7518 §3.4).
enum ECDSASignature {
    /// The size of each of r and s for P-256.
    static let scalarByteCount = 32

    /// DER `ECDSA-Sig-Value` to 64 raw bytes; nil if the DER is malformed or a value is too large.
    static func raw(fromDER der: UnsafeRawBufferPointer) -> [UInt8]? {
        var cursor: UnsafePointer<UInt8>? = der.cBytes
        // d2i advances `cursor`; we do not need it afterwards.
        guard let signature = d2i_ECDSA_SIG(nil, &cursor, der.count) else { return nil }
        defer { ECDSA_SIG_free(signature) }
        var r: OpaquePointer? = nil
        var s: OpaquePointer? = nil
        ECDSA_SIG_get0(signature, &r, &s)  // borrowed; freed with the signature
        guard let r, let s else { return nil }
        var ok = true
        let raw = [UInt8](unsafeUninitializedCapacity: 2 * scalarByteCount) { out, initialized in
            ok =
                BN_bn2binpad(r, out.baseAddress, Int32(scalarByteCount)) == scalarByteCount
                && BN_bn2binpad(s, out.baseAddress! + scalarByteCount, Int32(scalarByteCount)) == scalarByteCount
            initialized = 2 * scalarByteCount
        }
        return ok ? raw : nil
    }

    /// 64 raw bytes to DER; nil if the input is not 64 bytes or OpenSSL fails.
    static func der(fromRaw raw: UnsafeRawBufferPointer) -> [UInt8]? {
        guard raw.count == 2 * scalarByteCount else { return nil }
        guard let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let r = BN_bin2bn(raw.cBytes, Int32(scalarByteCount), nil)
        let s = BN_bin2bn(raw.cBytes + scalarByteCount, Int32(scalarByteCount), nil)
        // ECDSA_SIG_set0 takes ownership of both numbers only when it succeeds.
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var written: Int32 = 0
        let der = [UInt8](unsafeUninitializedCapacity: Int(length)) { out, initialized in
            var cursor = out.baseAddress  // i2d writes here and advances the cursor
            written = i2d_ECDSA_SIG(signature, &cursor)
            initialized = written == length ? Int(length) : 0
        }
        return written == length ? der : nil
    }
}
