/// Sends the answer to one request. Answers exactly once, from any thread; later calls are ignored, and so is an
/// answer for a client that has already gone.
public struct HTTPResponder: Sendable {
    let context: RequestContext

    /// Sends `response` (or does nothing if this request was already answered or its connection is gone).
    public func respond(_ response: HTTPResponse) {
        context.deliver(response)
    }
}
