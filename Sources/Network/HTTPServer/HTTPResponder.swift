import HTTP1
import Synchronization

/// Sends the answer to one request. Answers exactly once, from any thread; later calls are ignored, and so is an
/// answer for a client that has already gone.
public struct HTTPResponder: Sendable {
    private enum Target: Sendable {
        case request(RequestContext)
        case closure(ClosureTarget)
    }

    private let target: Target

    init(context: RequestContext) {
        target = .request(context)
    }

    /// A responder that hands the first answer to `deliver` and ignores later ones: for testing handlers without
    /// a server.
    public init(_ deliver: @escaping @Sendable (HTTP1Response) -> Void) {
        target = .closure(ClosureTarget(deliver))
    }

    /// Sends `response` (or does nothing if this request was already answered or its connection is gone). From any
    /// thread: the answer is written by the worker that owns the connection.
    public func respond(_ response: HTTP1Response) {
        switch target {
        case .request(let context):
            context.deliver(response)
        case .closure(let closure):
            closure.deliver(response)
        }
    }
}

private final class ClosureTarget: Sendable {
    private let answered = Atomic<Bool>(false)
    private let body: @Sendable (HTTP1Response) -> Void

    init(_ body: @escaping @Sendable (HTTP1Response) -> Void) {
        self.body = body
    }

    func deliver(_ response: HTTP1Response) {
        if !answered.exchange(true, ordering: .acquiringAndReleasing) {
            body(response)
        }
    }
}
