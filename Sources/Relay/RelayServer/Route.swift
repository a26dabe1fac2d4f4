import RelayCore

/// Where a request goes (docs/DESIGN.md, "HTTP API"): the relay's one route table. Each row says an endpoint's path,
/// methods, body limit and whether it counts against the client's address; ``RelayHTTPHandler`` answers by
/// ``endpoint`` and reads everything else from here.
///
/// The server resolves a request's route once, when its headers are in (``RelayHTTPHandler/route(path:)``), and
/// hands its ``number`` (its row in ``table``) to every callback of the handler (head, body, refusal, oversized
/// body) with the head.
struct Route: Equatable, Sendable {
    enum Endpoint: String, Sendable {
        case grant, push, healthz, readyz, other
    }

    let endpoint: Endpoint
    /// The exact path; nil for the rows that take every other path.
    let path: String?
    /// The methods this endpoint takes (a 405 lists them in `Allow`).
    let methods: [String]
    /// The largest body read; a longer one is answered 413 with ``tooLarge``. 0: the endpoint reads none.
    let bodyLimit: Int
    /// Under `/v1/`, existing or not: the request counts against its client's address.
    let countsAgainstAddress: Bool
    /// The 413 for a body over ``bodyLimit`` (only the endpoints that read a body get one; its detail names the
    /// limit, checked against ``bodyLimit`` by RoutingTests).
    let tooLarge: RelayError

    /// Every route, in the order of their ``number``s.
    static let table: [Route] = [
        Route(
            .grant, "/v1/grant", ["POST"], GrantRequest.bodyLimit, counts: true,
            tooLarge: RelayError.tooLarge.detail("body: larger than 2048 bytes, the limit of /v1/grant")),
        Route(
            .push, "/v1/push", ["POST"], PushRequest.bodyLimit, counts: true,
            tooLarge: RelayError.tooLarge.detail("body: larger than 8192 bytes, the limit of /v1/push")),
        Route(.healthz, "/healthz", ["GET", "HEAD"], 0, counts: false),
        Route(.readyz, "/readyz", ["GET", "HEAD"], 0, counts: false),
        // Any other path: under /v1/ it still counts against the address (probing costs the prober).
        Route(.other, nil, ["POST"], 0, counts: true),
        Route(.other, nil, ["POST"], 0, counts: false),
    ]

    private init(
        _ endpoint: Endpoint, _ path: String?, _ methods: [String], _ bodyLimit: Int, counts: Bool,
        tooLarge: RelayError = .tooLarge
    ) {
        self.tooLarge = tooLarge
        self.endpoint = endpoint
        self.path = path
        self.methods = methods
        self.bodyLimit = bodyLimit
        countsAgainstAddress = counts
    }

    /// The route of `path`.
    init(path: String) {
        self.init(number: Self.number(of: path))
    }

    /// The route whose ``number`` this is (a number no route has: any other path, not under `/v1/`).
    init(number: Int) {
        self = Self.table.indices.contains(number) ? Self.table[number] : Self.table[Self.table.count - 1]
    }

    /// The route as ``HTTPServer/HTTPRequestHead/route`` carries it: its row in ``table``.
    static func number(of path: String) -> Int {
        if let exact = table.firstIndex(where: { $0.path == path }) { return exact }
        return path.hasPrefix("/v1/") ? table.count - 2 : table.count - 1
    }

    var number: Int { Self.table.firstIndex(of: self)! }

    func allows(_ method: String) -> Bool {
        methods.contains(method)
    }

    /// Whether a request with `method` has its body read: an existing endpoint that takes the method.
    func readsBody(_ method: String) -> Bool {
        endpoint != .other && allows(method)
    }

    /// The methods as a 405 lists them (RFC 9110, 15.5.6).
    var allow: String { methods.joined(separator: ", ") }

}

extension Route.Endpoint {
    /// The methods as a 405 lists them, from the endpoint's row in the route table.
    var allow: String {
        (Route.table.first { $0.endpoint == self } ?? Route(number: -1)).allow
    }
}
