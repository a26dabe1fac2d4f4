import MonotonicTime
import OutboundConnections
import TLS

/// What every connection of one client shares: the origin, the TLS context, the limits.
/// Built once by `HTTP2Client.init`, then only read (on the client's loop).
final class ClientSettings: Sendable {
    /// The host to verify the certificate against (IPv6 literals without brackets).
    let host: String
    /// The `:authority` of every request: `host` or `host:port`, IPv6 literals in brackets.
    let authority: String
    /// The host is an IP address literal: verified against the certificate's IP addresses, no SNI.
    let hostIsAddress: Bool
    let port: UInt16
    let maxStreams: Int
    let tls: TLSClientContext
    let provesConnection: @Sendable (Int) -> Bool
    let retiresConnection: @Sendable (HTTP2Response) -> Bool
    let timing: ConnectionStateMachine.Timing
    let onEvent: (@Sendable (HTTP2ClientEvent) -> Void)?
    /// The proxy every connection goes through, or nil.
    let proxy: ClientStream.Proxy?

    init(configuration: HTTP2ClientConfiguration) throws(HTTP2ClientError) {
        guard let origin = Origin(configuration.origin) else {
            throw HTTP2ClientError(
                .invalidConfiguration, "origin must be https://host[:port] without a path",
                mayHaveBeenProcessed: false)
        }
        guard configuration.maxConnections >= 1, configuration.maxStreamsPerConnection >= 1 else {
            throw HTTP2ClientError(
                .invalidConfiguration, "maxConnections and maxStreamsPerConnection must be at least 1",
                mayHaveBeenProcessed: false)
        }
        guard configuration.connectTimeout > .zero, configuration.pingInterval > .zero,
            configuration.pingTimeout > .zero
        else {
            throw HTTP2ClientError(
                .invalidConfiguration, "connectTimeout, pingInterval and pingTimeout must be positive",
                mayHaveBeenProcessed: false)
        }
        host = origin.host
        authority = origin.authority
        hostIsAddress = origin.isAddress
        port = origin.port
        maxStreams = configuration.maxStreamsPerConnection
        do {
            tls = try TLSClientContext(extraCAFile: configuration.caFile, alpn: ["h2"])
        } catch {
            throw HTTP2ClientError(.invalidConfiguration, error.reason, mayHaveBeenProcessed: false)
        }
        provesConnection = configuration.provesConnection
        retiresConnection = configuration.retiresConnection
        timing = ConnectionStateMachine.Timing(
            connectTimeout: configuration.connectTimeout.nanoseconds,
            pingInterval: configuration.pingInterval.nanoseconds,
            pingTimeout: configuration.pingTimeout.nanoseconds)
        onEvent = configuration.onEvent
        proxy = configuration.proxy.map {
            ClientStream.Proxy(
                host: $0.host, port: $0.port,
                authorization: $0.credentials.map { "Basic " + Self.base64(Array($0.utf8)) })
        }
    }

    /// Standard base64 with padding (RFC 4648, 4), for the proxy's Basic credentials.
    static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let remaining = bytes.count - index
            let chunk =
                UInt32(bytes[index]) << 16 | (remaining > 1 ? UInt32(bytes[index + 1]) << 8 : 0)
                | (remaining > 2 ? UInt32(bytes[index + 2]) : 0)
            out.append(alphabet[Int(chunk >> 18 & 63)])
            out.append(alphabet[Int(chunk >> 12 & 63)])
            out.append(remaining > 1 ? alphabet[Int(chunk >> 6 & 63)] : UInt8(ascii: "="))
            out.append(remaining > 2 ? alphabet[Int(chunk & 63)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// `https://host[:port]`, parsed and checked (no user info, path, query or fragment).
struct Origin: Equatable {
    let host: String
    let port: UInt16
    let authority: String
    let isAddress: Bool

    init?(_ text: String) {
        let scheme = "https://"
        guard text.count > scheme.count, text.prefix(scheme.count).lowercased() == scheme else { return nil }
        let rest = text.dropFirst(scheme.count)
        guard !rest.contains(where: { "/?#@ \\".contains($0) || $0.asciiValue.map { $0 < 0x21 || $0 > 0x7E } ?? true })
        else { return nil }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
            guard host.contains(":"), Self.isIPv6(String(host)) else { return nil }
        } else {
            let parts = rest.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { return nil }
            host = parts[0]
            if parts.count == 2 { portText = parts[1] }
        }
        guard !host.isEmpty else { return nil }
        var port: UInt16 = 443
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isASCII),
                portText.allSatisfy(\.isNumber), let value = UInt16(portText), value > 0
            else { return nil }
            port = value
        }
        let hostText = String(host).lowercased()
        self.host = hostText
        self.port = port
        isAddress = hostText.contains(":") || Self.isIPv4(hostText)
        let bracketed = hostText.contains(":") ? "[\(hostText)]" : hostText
        authority = port == 443 ? bracketed : "\(bracketed):\(port)"
    }

    private static func isIPv4(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4
            && parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isNumber) && Int($0)! <= 255 }
    }

    private static func isIPv6(_ text: String) -> Bool {
        text.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
    }
}
