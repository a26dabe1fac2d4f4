/// `host:port` or `[ipv6]:port`; for `listen`, also ``systemd``.
public struct ListenAddress: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    /// `listen: "systemd"`: the listening socket the service manager passes (docs/DESIGN.md, "Lifecycle").
    public static let systemd = ListenAddress(host: "systemd", port: 0)

    /// Whether this is ``systemd`` (whatever port was found on the socket since).
    public var isSystemd: Bool { host == Self.systemd.host }

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// `host:port` or `[ipv6]:port` (``HostPort``), the port always given; nil for anything else.
    public init?(_ text: String) {
        guard let parts = try? HostPort(Substring(text)), !parts.host.isEmpty,
            parts.isBracketed == parts.host.contains(":"), let portText = parts.portText,
            let port = HostPort.port(portText)
        else { return nil }
        self.host = String(parts.host)
        self.port = port
    }

    /// Whether `host` is an IPv4 or IPv6 address, written as `inet_pton` reads it (dotted quad without leading
    /// zeros; IPv6 groups with at most one `::`, optionally ending in a dotted quad; no zone). The listen host
    /// is an address, never a name: `check` and `serve` refuse a name alike, rather than letting a resolver pick.
    public static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") ? isIPv6(host) : isIPv4(Substring(host))
    }

    private static func isIPv4(_ text: Substring) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4
            && parts.allSatisfy { part in
                !part.isEmpty && part.count <= 3 && part.allSatisfy { $0.isASCII && $0.isNumber }
                    && (part == "0" || !part.hasPrefix("0")) && Int(part)! <= 255
            }
    }

    private static func isIPv6(_ text: String) -> Bool {
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return false }
        var groups = 0
        for (index, half) in halves.enumerated() where !half.isEmpty {
            let parts = half.split(separator: ":", omittingEmptySubsequences: false)
            for (position, part) in parts.enumerated() {
                if index == halves.count - 1 && position == parts.count - 1 && part.contains(".") {
                    guard isIPv4(part) else { return false }
                    groups += 2
                    continue
                }
                guard (1...4).contains(part.count), part.allSatisfy(\.isHexDigit) else { return false }
                groups += 1
            }
        }
        return halves.count == 2 ? groups <= 7 : groups == 8
    }

    public var description: String {
        if isSystemd { return port == 0 ? host : "the socket systemd passed, port \(port)" }
        return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
