import EventLoops
import OutboundConnections
import TLS

/// HTTPS for the load: every connection a keep-alive TLS connection, made as a channel's client makes it (TLS 1.2 or
/// later, ALPN `http/1.1`, the chain verified against `--ca-file` beside the system's roots and the certificate's
/// name against `--server-name`). The records go through the project's ``OutboundConnections/ClientStream``, the APNs
/// client's own, so the load generator spends on TLS what an efficient client would.
struct LoadTLS: Sendable {
    /// The context every connection's session is made from (one per measurement).
    let stream: ClientStream.TLS
    /// Where to connect (the target's address, as text: `ClientStream` connects by host and port).
    let host: String
    let port: UInt16

    /// `--ca-file FILE` (and `--server-name NAME`, `localhost` unless given) for `target`; nil without `--ca-file`
    /// (plain HTTP).
    static func from(_ options: Arguments, target: String) throws(LoadError) -> LoadTLS? {
        let caFile = options.string("ca-file", default: "")
        guard !caFile.isEmpty else { return nil }
        guard let colon = target.lastIndex(of: ":"), let port = UInt16(target[target.index(after: colon)...]) else {
            throw LoadError(.usage, "--target must be an IPv4 HOST:PORT")
        }
        let context: TLSClientContext
        do {
            context = try TLSClientContext(extraCAFile: caFile, alpn: [ALPN.http11])
        } catch {
            throw LoadError(.usage, "--ca-file: \(error.reason)")
        }
        return LoadTLS(
            stream: ClientStream.TLS(context: context, serverName: options.string("server-name", default: "localhost")),
            host: String(target[..<colon]), port: port)
    }
}
