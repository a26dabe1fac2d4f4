import COpenSSL

/// Application-Layer Protocol Negotiation (RFC 7301) in one place: how a client offers protocols,
/// how a server picks one from an offer, and the check after the handshake. The APNs client and the
/// simulator both speak "h2" only (APNs speaks nothing else); the relay's front speaks "http/1.1".
public enum ALPN {
    /// HTTP/2 over TLS.
    public static let http2 = "h2"
    /// HTTP/1.1 (the relay's own front).
    public static let http11 = "http/1.1"

    /// `names` as the wire list OpenSSL takes (`SSL_CTX_set_alpn_protos`): each name prefixed
    /// with its length in one byte. Names are short ASCII tokens; longer than 255 bytes is cut.
    public static func wireList(_ names: [String]) -> [UInt8] {
        names.flatMap { name in
            let bytes = Array(name.utf8.prefix(255))
            return [UInt8(bytes.count)] + bytes
        }
    }

    /// The offset of `name` in a client's `offer` (a wire list), at the name's first byte; nil
    /// if it is not offered or the list is malformed past the point reached. A server's selection
    /// callback must point into the offer itself, hence an offset rather than a copy.
    public static func find(_ name: String, in offer: UnsafeBufferPointer<UInt8>) -> Int? {
        let wanted = Array(name.utf8)
        var index = 0
        while index < offer.count {
            let length = Int(offer[index])
            let start = index + 1
            guard start + length <= offer.count else { return nil }
            if length == wanted.count && offer[start..<start + length].elementsEqual(wanted) { return start }
            index = start + length
        }
        return nil
    }

    /// Whether the finished handshake on `ssl` agreed on `name` (false when no protocol was agreed).
    static func agreed(on name: String, _ ssl: OpaquePointer) -> Bool {
        var selected: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &selected, &length)
        guard let selected else { return false }
        return UnsafeBufferPointer(start: selected, count: Int(length)).elementsEqual(name.utf8)
    }
}
