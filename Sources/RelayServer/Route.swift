import RelayCore

/// Where a request goes (DESIGN.md, "HTTP API"): the one place the relay matches a path. The server resolves
/// a request's route once, when its headers are in (``RelayHTTPHandler/route(path:)``), and hands its
/// ``number`` to every callback of the handler (head, body, refusal, oversized body) with the head.
struct Route: Equatable, Sendable {
    enum Endpoint: String, Sendable {
        case grant, push, healthz, readyz, other
    }

    let endpoint: Endpoint
    /// Under `/v1/`, existing or not: the request counts against its client's address.
    let countsAgainstAddress: Bool

    init(path: String) {
        switch path {
        case "/v1/grant": (endpoint, countsAgainstAddress) = (.grant, true)
        case "/v1/push": (endpoint, countsAgainstAddress) = (.push, true)
        case "/healthz": (endpoint, countsAgainstAddress) = (.healthz, false)
        case "/readyz": (endpoint, countsAgainstAddress) = (.readyz, false)
        default: (endpoint, countsAgainstAddress) = (.other, path.hasPrefix("/v1/"))
        }
    }

    /// The endpoints in the order ``number`` counts them (made once: every request passes through here).
    private static let endpoints: [Endpoint] = [.grant, .push, .healthz, .readyz, .other]

    /// The route as ``HTTPServer/HTTPRequestHead/route`` carries it.
    var number: Int { Self.endpoints.firstIndex(of: endpoint)! * 2 + (countsAgainstAddress ? 1 : 0) }

    /// The route whose ``number`` this is.
    init(number: Int) {
        endpoint = Self.endpoints.indices.contains(number / 2) ? Self.endpoints[number / 2] : .other
        countsAgainstAddress = number % 2 == 1
    }

    func allows(_ method: String) -> Bool {
        endpoint.methods.contains(method)
    }

    /// The largest body read; a longer one is answered 413 with ``tooLarge``.
    var bodyLimit: Int {
        switch endpoint {
        case .grant: GrantRequest.bodyLimit
        case .push: PushRequest.bodyLimit
        case .healthz, .readyz, .other: 0
        }
    }

    /// The 413 for a body over ``bodyLimit`` (only the endpoints that read a body get one).
    var tooLarge: RelayError {
        endpoint == .push
            ? RelayError.tooLarge.detail("body: larger than 8192 bytes, the limit of /v1/push")
            : RelayError.tooLarge.detail("body: larger than 2048 bytes, the limit of /v1/grant")
    }
}

extension Route.Endpoint {
    /// The methods this endpoint takes.
    var methods: [String] { self == .healthz || self == .readyz ? ["GET", "HEAD"] : ["POST"] }

    /// The methods as a 405 lists them (RFC 9110, 15.5.6).
    var allow: String { methods.joined(separator: ", ") }
}
