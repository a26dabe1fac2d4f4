/// `duo-relay push`'s request as bytes: one `POST` of a JSON body, framed as the relay's front expects (a
/// `Content-Length`, then the connection closes).
public enum PushRequest {
    /// The request to `path` at `authority` (`host[:port]`, as the `Host` field writes it).
    public static func bytes(path: String, authority: String, userAgent: String, body: some Collection<UInt8>)
        -> [UInt8]
    {
        let head =
            "POST \(path) HTTP/1.1\r\nHost: \(authority)\r\nUser-Agent: \(userAgent)\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + Array(body)
    }
}
