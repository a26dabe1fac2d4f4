import RelayCrypto

/// What `duo-relay grant-info` says about one grant (docs/DESIGN.md, "Commands"): its version and key id, read
/// without a key; with the relay keys, its environment, issue time and expiry, or why it does not open. Never
/// the device token it holds. Pure: the keys, the lifetime and the time come in.
public struct GrantInspection: Sendable, Equatable {
    /// The grant's version byte, when its text decodes to a grant's length.
    public var version: UInt8?
    /// The key id it names, when its text decodes.
    public var keyID: UInt8?
    /// The opened grant's environment, issue time and expiry (Unix seconds), when it opens.
    public var environment: APNsEnvironment?
    public var issuedAt: UInt64?
    public var expiresAt: UInt64?
    /// Why it does not open, or why it was not opened (no keys given); nil when it opened.
    public var problem: String?
    /// The lines to print: no token, no key, no grant text.
    public var lines: [String]

    /// Whether the grant opened (with keys) or its header read (without).
    public var isReadable: Bool { keysGiven ? environment != nil : version == GrantCodec.version }
    private var keysGiven: Bool

    /// Inspects `text` (surrounding white space ignored) at Unix time `now`. `keys` nil: RELAY_KEYS not given.
    /// `lifetime` and `lifetimeSource` say which `grant_lifetime_s` the expiry is computed with.
    public init(_ text: String, keys: RelayKeys?, lifetime: UInt64, lifetimeSource: String, now: UInt64) {
        keysGiven = keys != nil
        lines = []
        let trimmed = text.trimmingWhiteSpace
        guard let bytes = Base64.urlDecode(trimmed), bytes.count >= GrantCodec.headerSize else {
            problem = "not a grant: not base64url (without padding) of a grant's bytes"
            lines = ["grant: \(problem!)"]
            return
        }
        version = bytes[0]
        keyID = bytes[1]
        lines.append("version: \(bytes[0])" + (bytes[0] == GrantCodec.version ? "" : " (unknown to this relay)"))
        lines.append("key id: \(bytes[1])")
        guard bytes[0] == GrantCodec.version else {
            problem = "does not open: version \(bytes[0]) is unknown (this relay seals version \(GrantCodec.version))"
            lines.append(problem!)
            return
        }
        guard let keys else {
            problem = "not opened: RELAY_KEYS is not given (any secret form), so environment and times are unknown"
            lines.append(problem!)
            return
        }
        do throws(GrantError) {
            // Opened whatever its age: the expiry is printed, not enforced.
            let opened = try GrantCodec.openNamingKey(trimmed, keys: keys, now: 0, lifetime: .max)
            let grant = opened.grant
            environment = grant.environment
            issuedAt = grant.issuedAt
            let (expiry, overflow) = grant.issuedAt.addingReportingOverflow(lifetime)
            expiresAt = overflow ? nil : expiry
            lines.append("environment: \(grant.environment)")
            lines.append("issued at: \(Timestamp.iso8601(grant.issuedAt))")
            if let expiresAt {
                let state =
                    now >= expiresAt
                    ? "expired: pushes with it get 401 grant_expired"
                    : "valid for \(Self.duration(expiresAt - now)) more"
                lines.append("expires at: \(Timestamp.iso8601(expiresAt)) (\(state))")
            } else {
                lines.append("expires at: never")
            }
            lines.append("grant lifetime: \(lifetime) s (\(lifetimeSource))")
        } catch {
            switch error.code {
            case .unknownKey:
                problem =
                    "does not open: RELAY_KEYS has no key \(bytes[1]) (it holds "
                    + keys.ids.map(String.init).joined(separator: ", ") + "); pushes with it get 401 grant_invalid"
            case .authenticationFailed:
                problem =
                    "does not open: key \(bytes[1]) of RELAY_KEYS did not seal it (another key with that id, or "
                    + "the grant was altered); pushes with it get 401 grant_invalid"
            default:
                problem = "does not open: not a grant's length or contents; pushes with it get 401 grant_invalid"
            }
            lines.append(problem!)
        }
    }

    private static func duration(_ seconds: UInt64) -> String {
        if seconds >= 2 * 86_400 { return "\(seconds / 86_400) days" }
        if seconds >= 2 * 3_600 { return "\(seconds / 3_600) hours" }
        if seconds >= 120 { return "\(seconds / 60) minutes" }
        return "\(seconds) s"
    }
}

extension String {
    fileprivate var trimmingWhiteSpace: Substring {
        var text = Substring(self)
        while let first = text.first, first.isWhitespace { text = text.dropFirst() }
        while let last = text.last, last.isWhitespace { text = text.dropLast() }
        return text
    }
}
