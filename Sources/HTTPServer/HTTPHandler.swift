/// The application side of an ``HTTPServer``. Every method may be called concurrently from server threads.
public protocol HTTPHandler: Sendable {
    /// Called on a server thread when the headers are in, before any body byte is read. Must not block.
    func head(_ head: HTTPRequestHead) -> HeadDecision

    /// Called once the whole body (at most the limit from ``HeadDecision/readBody(limit:)``) is read.
    /// Answer through `responder`, now or later from any thread. Must not block.
    func request(_ head: HTTPRequestHead, body: [UInt8], responder: HTTPResponder)

    /// The answer when a body exceeds the limit from ``HeadDecision/readBody(limit:)``: at once when the declared
    /// `Content-Length` is over it (before any body byte is read), or as soon as a chunked body grows past it.
    /// The connection is then closed.
    func bodyTooLarge(_ head: HTTPRequestHead) -> HTTPResponse
}
