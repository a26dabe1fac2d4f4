/// What the server knows about a request once its headers are in.
public struct HTTPRequestHead: Sendable {
    /// The method as sent (`GET`, `POST`, or any other token).
    public let method: String
    /// The path, percent-decoded by the server, without the query string.
    public let path: String
    /// The request header fields.
    public let headers: HTTPHeaders
    /// The socket peer (never the value of a forwarding header).
    public let peer: SocketPeer
    /// The declared `Content-Length`, or nil when none was sent (for example a chunked body).
    public let contentLength: Int?
    /// The handler's own number for the path (``HTTPHandler/route(path:)``), resolved once when the headers are in
    /// and handed back with the head to every callback, so that the path is matched once per request.
    public let route: Int
    /// The worker whose loop reads this request and runs the handler's callbacks for it (0 up to
    /// ``HTTPServerConfiguration/threads`` - 1): a handler keeps per-worker state in an array indexed by it, touched
    /// by that worker alone (no lock shared between workers).
    public let worker: Int
    /// The connection's memo of what the handler worked out from ``peer`` (the same object for every request of the
    /// connection; a fresh one for a head made by a test).
    public let peerMemo: PeerMemo

    /// Creates a request head (the server builds these; tests of handlers may too).
    public init(
        method: String, path: String, headers: HTTPHeaders, peer: SocketPeer, contentLength: Int?, route: Int = 0,
        worker: Int = 0, peerMemo: PeerMemo = PeerMemo()
    ) {
        self.worker = worker
        self.peerMemo = peerMemo
        self.method = method
        self.path = path
        self.headers = headers
        self.peer = peer
        self.contentLength = contentLength
        self.route = route
    }
}
