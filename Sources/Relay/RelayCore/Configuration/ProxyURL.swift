/// `apns.proxy`: `http://host:port` of an HTTP proxy that allows `CONNECT` (docs/DESIGN.md, "Egress proxy"). Never with
/// user information: the credentials come from `APNS_PROXY_AUTHORIZATION`.
public struct ProxyURL: Equatable, Sendable, CustomStringConvertible {
    /// A name or IP literal (an IPv6 literal without its brackets).
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Errors name `key` and never repeat the text: it may carry a password.
    static func parse(_ text: String, key: String) throws(ConfigurationError) -> ProxyURL {
        let form = "must be http://host:port (an HTTP proxy that allows CONNECT)"
        guard text.hasPrefix("http://") else {
            throw ConfigurationError(.invalid, key, text.contains("://") ? "has another scheme: \(form)" : form)
        }
        var authority = text.dropFirst("http://".count)
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        if authority.contains("@") {
            throw ConfigurationError(
                .invalid, key,
                "carries credentials: give user:password in APNS_PROXY_AUTHORIZATION, never in the configuration file")
        }
        guard !authority.isEmpty,
            !authority.contains(where: { "/?# ".contains($0) || !$0.isASCII || $0.asciiValue! < 0x21 })
        else {
            throw ConfigurationError(.invalid, key, "\(form), without a path, query or fragment")
        }
        let parts = try HostPort(authority, key: key, form: form)
        let host = parts.host
        if parts.isBracketed {
            guard host.contains(":"), host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw ConfigurationError(.invalid, key, "has a [host] that is not an IPv6 address")
            }
        }
        guard !host.isEmpty else { throw ConfigurationError(.invalid, key, "has no host: \(form)") }
        guard let portText = parts.portText else {
            throw ConfigurationError(.invalid, key, "has no port: \(form) (the port is always given)")
        }
        guard let port = HostPort.port(portText), port > 0 else {
            throw ConfigurationError(.invalid, key, "has a port that is not 1..65535")
        }
        return ProxyURL(host: String(host).lowercased(), port: port)
    }

    /// `http://host:port`: no credential is ever part of it.
    public var description: String { "http://" + name }

    /// `host:port`, an IPv6 literal in brackets.
    public var name: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }
}
