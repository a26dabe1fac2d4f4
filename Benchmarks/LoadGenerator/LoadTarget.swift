import EventLoops

/// Where the load goes: `--target 127.0.0.1:8787`, an IPv4 literal and a port (the benchmark stays on loopback).
struct LoadTarget: Sendable {
    /// As given, for the requests' `Host` header.
    let text: String
    let address: ResolvedAddress

    /// Nil unless `text` is an IPv4 literal, a colon and a port.
    init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        let host = String(text[..<colon])
        guard IPAddress(host)?.family == .ipv4, let address = ResolvedAddress.literal(host, port: port) else {
            return nil
        }
        self.text = text
        self.address = address
    }
}
