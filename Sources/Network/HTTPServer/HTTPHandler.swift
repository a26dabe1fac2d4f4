import HTTP1

/// The application side of an ``HTTPServer``. Every method may be called concurrently from server threads.
public protocol HTTPHandler: Sendable {
    /// The handler's number for a request's path, resolved once, before any other callback, and handed to each of
    /// them as ``HTTPRequestHead/route``. Must not block.
    func route(path: String) -> Int

    /// Called on a server thread when the headers are in, before any body byte is read. Must not block.
    func head(_ head: HTTPRequestHead) -> HeadDecision

    /// Called once the whole body (at most the limit from ``HeadDecision/readBody(limit:)``) is read.
    /// Answer through `responder`, now or later from any thread. Must not block.
    func request(_ head: HTTPRequestHead, body: [UInt8], responder: HTTPResponder)

    /// The answer when a body exceeds the limit from ``HeadDecision/readBody(limit:)``: at once when the declared
    /// `Content-Length` is over it (before any body byte is read), or as soon as a chunked body grows past it.
    /// The connection is then closed.
    func bodyTooLarge(_ head: HTTPRequestHead) -> HTTP1Response

    /// The answer to a request the server refuses from its framing or size before the handler has it whole: a target
    /// over ``HTTPServerConfiguration/maxURLBytes`` (414), a head over ``HTTPServerConfiguration/maxHeaderBytes`` or
    /// with too many lines (431), framing it cannot trust (400), an unknown transfer coding (501), another HTTP
    /// version (505). `head` holds what was read of the request (an empty method and path when the request line itself
    /// was refused). The handler may count the request (a rate limit) and answer otherwise. The connection then
    /// closes, lingering.
    func refused(_ head: HTTPRequestHead, refusal: HTTPRefusal) -> HTTP1Response
}

extension HTTPHandler {
    /// By default every path is route 0: a handler that does not route reads `head.path` itself.
    public func route(path: String) -> Int { 0 }

    /// By default: the refusal's plain answer (``HTTPRefusal/response``).
    public func refused(_ head: HTTPRequestHead, refusal: HTTPRefusal) -> HTTP1Response {
        refusal.response
    }
}
