import OutboundConnections
import TLS

/// How `duo-relay push` reaches the relay: plain TCP, or TLS that trusts the system's roots and the operator's own
/// CAs (for a relay behind a front whose certificate a private CA issued).
public struct PushTransport: Sendable {
    let tls: ClientStream.TLS?

    /// Plain TCP (an http:// relay).
    public static let plain = PushTransport(tls: nil)

    /// TLS to an https:// relay: the system's roots and the PEM certificates of `extraCAFile` trusted, HTTP/1.1 by
    /// ALPN, the certificate checked against `serverName`.
    public static func tls(serverName: String, extraCAFile: String?) throws(TLSError) -> PushTransport {
        PushTransport(
            tls: ClientStream.TLS(
                context: try TLSClientContext(extraCAFile: extraCAFile, alpn: ["http/1.1"]), serverName: serverName))
    }
}
