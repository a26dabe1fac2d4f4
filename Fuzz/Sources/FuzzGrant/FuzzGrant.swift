import FuzzSupport
import RelayCore
import RelayCrypto

/// Grant opening (docs/DESIGN.md, "The grant"), three ways, chosen by the first byte:
/// - 0: an arbitrary plaintext, correctly sealed with a fixed key, is opened and the result is
///   compared with an independent reading of the layout (reaches everything after authentication);
/// - 1: an arbitrary `Grant` is sealed, then opened at and around its expiry;
/// - anything else: the whole input is grant text, opened with the fixed keys.
/// In every mode, whatever opens must re-seal to the same text and re-open to the same grant.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGrant(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    switch input.first {
    case 0: GrantTarget.openAuthenticatedPlaintext(ByteReader(input.dropFirst()))
    case 1: GrantTarget.sealAndOpen(ByteReader(input.dropFirst()))
    default: GrantTarget.openText(input)
    }
    return 0
}

@_cdecl("FuzzGrant_main")
public func fuzzGrantMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    if CommandLine.arguments.dropFirst().first == "--print-seed-grants" {
        for text in GrantTarget.seedGrants() { print(text) }
        return 0
    }
    return runLibFuzzer(argc, argv, fuzzGrant)
}

enum GrantTarget {
    static let keys = FuzzKeys.relayKeys
    static let headerSize = 2
    static let nonceSize = 12
    static let tagSize = 16

    static func openText(_ input: [UInt8]) {
        let text = String(decoding: input, as: UTF8.self)
        let result = Result { () throws(GrantError) in
            try GrantCodec.open(text, keys: keys, now: FuzzKeys.now, lifetime: FuzzKeys.lifetime)
        }
        // The same text inside a larger string (a Substring not starting at offset 0) reads the same.
        let framed = offsetSubstring(text)
        let framedResult = Result { () throws(GrantError) in
            try GrantCodec.open(framed, keys: keys, now: FuzzKeys.now, lifetime: FuzzKeys.lifetime)
        }
        invariant(result == framedResult, "a Substring opened differently from its String")
        invariant(GrantCodec.keyID(of: text) == GrantCodec.keyID(of: framed), "keyID differs for a Substring")
        switch result {
        case .success(let grant):
            checkOpened(grant, text: text, now: FuzzKeys.now, lifetime: FuzzKeys.lifetime)
            let named = try? GrantCodec.openNamingKey(text, keys: keys, now: FuzzKeys.now, lifetime: FuzzKeys.lifetime)
            invariant(
                named?.grant == grant && named?.keyID == GrantCodec.keyID(of: text),
                "openNamingKey disagrees with open or keyID(of:)")
        case .failure(let error):
            if error.code == .unknownKey {
                let id = GrantCodec.keyID(of: text)
                invariant(id != nil && keys[id!] == nil, "unknownKey for a key id that exists or is unreadable")
            }
        }
    }

    /// Seals `version | keyID | nonce | AES-GCM(plaintext)` directly, then checks `open` against
    /// what the layout says the answer must be.
    static func openAuthenticatedPlaintext(_ reader: ByteReader) {
        var reader = reader
        let version = reader.byte() == 0 ? GrantCodec.version : reader.byte()
        let keyID = reader.byte()
        let now = reader.uint64()
        let lifetime = reader.uint64()
        let nonce = reader.bytes(nonceSize)
        let plaintext = reader.remaining
        let header = [version, keyID]
        let key = keys[keyID] ?? FuzzKeys.strayKey
        guard let sealed = try? AES.GCM.seal(plaintext, using: key, nonce: nonce, authenticating: header) else {
            invariant(false, "AES-GCM seal failed")
            return
        }
        let text = Base64.urlEncode(header + nonce + sealed.ciphertext + sealed.tag)
        let result = Result { () throws(GrantError) in
            try GrantCodec.open(text, keys: keys, now: now, lifetime: lifetime)
        }

        // The expected answer, in the order docs/DESIGN.md lists the checks.
        let expected: Result<Grant, GrantError>
        if plaintext.count < 9 || plaintext.count > 9 + GrantCodec.maximumTokenBytes || version != GrantCodec.version {
            expected = .failure(GrantError(.malformed))
        } else if keys[keyID] == nil {
            expected = .failure(GrantError(.unknownKey))
        } else if plaintext[0] > 1 || plaintext.count == 9 {
            expected = .failure(GrantError(.malformed))
        } else {
            let issuedAt = plaintext[1..<9].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let (expiry, overflow) = issuedAt.addingReportingOverflow(lifetime)
            if !overflow && now >= expiry {
                expected = .failure(GrantError(.expired))
            } else {
                expected = .success(
                    Grant(
                        environment: plaintext[0] == 0 ? .sandbox : .production, issuedAt: issuedAt,
                        token: Array(plaintext[9...])))
            }
        }
        invariant(result == expected, "open disagrees with the grant layout")
        if case .success(let grant) = result { checkOpened(grant, text: text, now: now, lifetime: lifetime) }
    }

    /// Seals an arbitrary grant; it must open while fresh and report expiry from its last second on.
    static func sealAndOpen(_ reader: ByteReader) {
        var reader = reader
        let environment: APNsEnvironment = reader.byte() & 1 == 0 ? .sandbox : .production
        let keyID = reader.byte()
        let issuedAt = reader.uint64()
        let lifetime = reader.uint64()
        let nonce = reader.bytes(nonceSize)
        let token = reader.remaining
        let grant = Grant(environment: environment, issuedAt: issuedAt, token: token)
        let text: String
        do {
            text = try GrantCodec.seal(grant, keyID: keyID, keys: keys, nonce: nonce)
        } catch {
            invariant(error.code == .unknownKey && keys[keyID] == nil, "seal failed for a known key")
            return
        }
        invariant(keys[keyID] != nil, "sealed with an unknown key id")
        invariant(GrantCodec.keyID(of: text) == keyID, "keyID(of:) does not name the sealing key")
        let opened = Result { () throws(GrantError) in
            try GrantCodec.open(text, keys: keys, now: issuedAt, lifetime: lifetime)
        }
        // Seal does not bound the token; open does (only GrantRequest-validated tokens are sealed).
        guard !token.isEmpty, token.count <= GrantCodec.maximumTokenBytes else {
            invariant(opened == .failure(GrantError(.malformed)), "a grant with an out-of-range token opened")
            return
        }
        let (expiry, overflow) = issuedAt.addingReportingOverflow(lifetime)
        if lifetime == 0 {
            invariant(opened == .failure(GrantError(.expired)), "a zero lifetime grant opened")
        } else {
            invariant(opened == .success(grant), "a fresh grant did not open to itself")
        }
        if !overflow {
            let atExpiry = Result { () throws(GrantError) in
                try GrantCodec.open(text, keys: keys, now: expiry, lifetime: lifetime)
            }
            invariant(atExpiry == .failure(GrantError(.expired)), "a grant opened at its expiry second")
            if expiry > 0, lifetime > 0 {
                let justBefore = Result { () throws(GrantError) in
                    try GrantCodec.open(text, keys: keys, now: expiry - 1, lifetime: lifetime)
                }
                invariant(justBefore == .success(grant), "a grant did not open in its last second")
            }
        }
        checkOpened(grant, text: text, now: issuedAt, lifetime: lifetime, mustBeFresh: false)
    }

    /// Real grants under the fixed keys, for the seed corpora (`FuzzGrant --print-seed-grants`).
    static func seedGrants() -> [String] {
        let token = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let nonce = (0..<12).map { UInt8(truncatingIfNeeded: $0 &+ 100) }
        let grants: [(Grant, UInt8)] = [
            (Grant(environment: .sandbox, issuedAt: FuzzKeys.now - 60, token: token), 1),
            (Grant(environment: .production, issuedAt: FuzzKeys.now - 60, token: token), 0),
            (Grant(environment: .sandbox, issuedAt: FuzzKeys.now - 1, token: [0xAB]), 255),
            (Grant(environment: .production, issuedAt: 0, token: token), 1),
        ]
        return grants.map { try! GrantCodec.seal($0.0, keyID: $0.1, keys: keys, nonce: nonce) }
    }

    /// What holds for every grant that opened from `text`.
    static func checkOpened(_ grant: Grant, text: String, now: UInt64, lifetime: UInt64, mustBeFresh: Bool = true) {
        guard let bytes = Base64.urlDecode(text), bytes.count >= headerSize + nonceSize + tagSize else {
            invariant(false, "an opened grant is not base64url of a long enough byte string")
            return
        }
        invariant(!grant.token.isEmpty && grant.token.count <= GrantCodec.maximumTokenBytes, "token size")
        invariant(bytes[0] == GrantCodec.version, "version")
        invariant(GrantCodec.keyID(of: text) == bytes[1], "keyID(of:)")
        invariant(
            bytes.count == headerSize + nonceSize + 9 + grant.token.count + tagSize, "grant length does not match")
        if mustBeFresh {
            let (expiry, overflow) = grant.issuedAt.addingReportingOverflow(lifetime)
            invariant(overflow || now < expiry, "an expired grant opened")
        }
        // Canonical: the same grant, key and nonce seal to exactly the same text.
        let nonce = Array(bytes[headerSize..<(headerSize + nonceSize)])
        let resealed = try? GrantCodec.seal(grant, keyID: bytes[1], keys: keys, nonce: nonce)
        invariant(resealed == text, "re-sealing an opened grant gave different text")
        let reopened = try? GrantCodec.open(
            resealed ?? "", keys: keys, now: grant.issuedAt, lifetime: lifetime == 0 ? 1 : lifetime)
        invariant(reopened == grant, "a re-sealed grant did not re-open to the same grant")
    }
}
