import ErrorCodes
import RelayCrypto

/// Seals and opens push grants (docs/DESIGN.md, "The grant"):
/// `base64url(version | key_id | nonce | ciphertext | tag)`, AAD `version | key_id`,
/// plaintext `environment | issued_at (u64 BE) | token`.
public enum GrantCodec {
    public static let version: UInt8 = 0x01
    /// The AES-GCM nonce of every grant.
    public static let nonceSize = 12
    static let tagSize = 16
    static let headerSize = 2
    static let fixedPlaintextSize = 9
    /// Longest token accepted in a grant (1024 hex characters).
    public static let maximumTokenBytes = 512
    /// The sealed bytes of a grant holding the longest token (its text is the base64url of these).
    public static let maximumSealedBytes = headerSize + nonceSize + fixedPlaintextSize + maximumTokenBytes + tagSize

    /// Seals `grant` under key `keyID` of `keys` with a fresh random nonce.
    public static func seal(
        _ grant: Grant, keyID: UInt8, keys: RelayKeys,
        nonce: [UInt8] = SecureRandom.bytes(count: nonceSize)
    ) throws(GrantError) -> String {
        guard let key = keys[keyID] else { throw GrantError(.unknownKey) }
        guard nonce.count == nonceSize else { throw GrantError(.malformed) }
        var plaintext = [UInt8]()
        plaintext.reserveCapacity(fixedPlaintextSize + grant.token.count)
        plaintext.append(grant.environment.rawValue)
        for shift in stride(from: 56, through: 0, by: -8) {
            plaintext.append(UInt8(truncatingIfNeeded: grant.issuedAt >> UInt64(shift)))
        }
        plaintext.append(contentsOf: grant.token)
        let header: [UInt8] = [version, keyID]
        let sealed: AES.GCM.Sealed
        do {
            sealed = try AES.GCM.seal(plaintext, using: key, nonce: nonce, authenticating: header)
        } catch {
            throw GrantError(.malformed)
        }
        var out = header
        out.reserveCapacity(headerSize + nonceSize + sealed.ciphertext.count + tagSize)
        out.append(contentsOf: nonce)
        out.append(contentsOf: sealed.ciphertext)
        out.append(contentsOf: sealed.tag)
        return Base64.urlEncode(out)
    }

    /// The key id a grant names, read without opening it.
    public static func keyID(of text: some StringProtocol) -> UInt8? {
        guard let head = Base64.urlDecode(text.prefix(4)), head.count == 3, head[0] == version else { return nil }
        return head[1]
    }

    /// Opens a grant. Throws `.malformed`, `.unknownKey` or `.authenticationFailed` (all
    /// `grant_invalid` to a client), or `.expired` from second `issuedAt + lifetime` on.
    public static func open(
        _ text: some StringProtocol, keys: RelayKeys, now: UInt64, lifetime: UInt64
    ) throws(GrantError) -> Grant {
        try openNamingKey(text, keys: keys, now: now, lifetime: lifetime).grant
    }

    /// A grant opened, and the id of the key it was sealed under.
    public struct Opened: Sendable, Equatable {
        public var grant: Grant
        public var keyID: UInt8

        public init(grant: Grant, keyID: UInt8) {
            self.grant = grant
            self.keyID = keyID
        }
    }

    /// `open`, also naming the key the grant was sealed under (for counting which keys are in use).
    public static func openNamingKey(
        _ text: some StringProtocol, keys: RelayKeys, now: UInt64, lifetime: UInt64
    ) throws(GrantError) -> Opened {
        guard let bytes = Base64.urlDecode(text),
            bytes.count >= headerSize + nonceSize + fixedPlaintextSize + tagSize,
            bytes.count <= maximumSealedBytes
        else { throw GrantError(.malformed) }
        guard bytes[0] == version else { throw GrantError(.malformed) }
        guard let key = keys[bytes[1]] else { throw GrantError(.unknownKey) }
        let nonceEnd = headerSize + nonceSize
        let tagStart = bytes.count - tagSize
        let plaintext: [UInt8]
        do {
            plaintext = try AES.GCM.open(
                ciphertext: bytes[nonceEnd..<tagStart], tag: bytes[tagStart...],
                nonce: bytes[headerSize..<nonceEnd], using: key, authenticating: bytes[0..<headerSize])
        } catch {
            throw GrantError(.authenticationFailed)
        }
        guard let environment = APNsEnvironment(rawValue: plaintext[0]) else { throw GrantError(.malformed) }
        var issuedAt: UInt64 = 0
        for index in 1...8 { issuedAt = issuedAt << 8 | UInt64(plaintext[index]) }
        let token = Array(plaintext[fixedPlaintextSize...])
        guard !token.isEmpty else { throw GrantError(.malformed) }
        let (expiry, overflow) = issuedAt.addingReportingOverflow(lifetime)
        if !overflow && now >= expiry { throw GrantError(.expired) }
        return Opened(grant: Grant(environment: environment, issuedAt: issuedAt, token: token), keyID: bytes[1])
    }
}

/// Why a grant did not open (or could not be sealed).
public struct GrantError: CodedError {
    /// What went wrong, to decide by (the static members of `ErrorCode` below).
    public typealias Code = ErrorCode<GrantError>
    public let code: Code
    /// For people: the code's name (a grant's failure never says more, so that it leaks nothing of the grant).
    public var reason: String { code.name }
    public init(_ code: Code) { self.code = code }

    /// The client-facing answer.
    public var relayError: RelayError { code == .expired ? .grantExpired : .grantInvalid }
}

extension ErrorCode where Domain == GrantError {
    /// Not a grant: bad base64url, wrong size or version, an unknown environment, no token.
    public static var malformed: Self { Self("malformed") }
    /// Sealed with a key id the relay does not hold.
    public static var unknownKey: Self { Self("unknownKey") }
    /// The tag did not verify: altered, or sealed with another key.
    public static var authenticationFailed: Self { Self("authenticationFailed") }
    /// Past its lifetime.
    public static var expired: Self { Self("expired") }
}
