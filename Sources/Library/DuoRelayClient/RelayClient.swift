import ErrorCodes
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A channel's client for one duo-relay: posts pushes and mints grants, and says what to do
/// about each answer (``PushOutcome``, ``GrantOutcome``) instead of returning status codes.
///
/// One client keeps its connections to the relay open between calls (HTTP/1.1 keep-alive,
/// up to `maxConnections` at once); share it rather than making one per push. It never logs.
///
/// ```swift
/// let relay = RelayClient(relay: URL(string: "https://relay.example")!)
/// switch await relay.push(RelayPush(sealed: sealed, id: id, thread: thread), grant: grant) {
/// case .delivered: break
/// case .dropRegistration: forgetThePhone()
/// case .renewGrant: askThePhoneForANewGrant()
/// case .retry(let after, _): scheduleAgain(after: after ?? .seconds(1))
/// case .failed(let maybe): scheduleAgain(after: .seconds(1))  // same id: replaces, never duplicates
/// case .rejected(let detail): log(detail)  // a bug on this side
/// }
/// ```
public final class RelayClient: Sendable {
    /// The relay's base URL (`https://relay.example`); `/v1/push` and `/v1/grant` are below it.
    public let relay: URL
    /// The deadline of each call when the call gives none.
    public let timeout: Duration
    private let session: URLSession
    private let sessionEnd = SessionEnd()

    /// - Parameters:
    ///   - relay: the relay's base URL.
    ///   - timeout: each call's deadline, from sending to the whole answer. The relay answers a
    ///     push within its APNs timeout (10 s by default), so allow more than that.
    ///   - maxConnections: connections kept to the relay at most.
    public init(relay: URL, timeout: Duration = .seconds(15), maxConnections: Int = 4) {
        self.relay = relay
        self.timeout = timeout
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = maxConnections
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        session = URLSession(configuration: configuration, delegate: sessionEnd, delegateQueue: nil)
    }

    deinit {
        session.finishTasksAndInvalidate()
    }

    /// Lets the calls in flight finish, closes the connections, and returns once the session has let go of
    /// everything. Optional: a client that is dropped does the same on its own, later. A program that exits right
    /// after its last call closes first, so that nothing is still being torn down while it exits.
    public func close() async {
        session.finishTasksAndInvalidate()
        await sessionEnd.ended()
    }

    /// Posts one push. Never throws: every failure is an outcome.
    public func push(_ push: RelayPush, grant: String, timeout: Duration? = nil) async -> PushOutcome {
        await pushAnswered(push, grant: grant, timeout: timeout).outcome
    }

    /// Posts one push, and gives the relay's answer (its HTTP status, `error` and `detail`) beside the
    /// outcome; nil when none came. For tools that show the status, such as `duo-relay push`.
    public func pushAnswered(
        _ push: RelayPush, grant: String, timeout: Duration? = nil
    ) async -> (outcome: PushOutcome, answer: RelayAnswer?) {
        let timeout = timeout ?? self.timeout
        // A deadline already passed (a retrying call's last moment) sends nothing.
        guard timeout > .zero else { return (.failed(mayHaveBeenDelivered: false), nil) }
        switch await post("v1/push", body: push.body(grant: grant), timeout: timeout) {
        case .success(let answer): return (PushOutcome(answer), answer)
        case .failure(let failure): return (.failed(mayHaveBeenDelivered: failure.requestMayHaveArrived), nil)
        }
    }

    /// Mints a grant for a phone's APNs device token (hex). Phones call this; a channel rarely does.
    public func grant(token: String, environment: RelayEnvironment, timeout: Duration? = nil) async -> GrantOutcome {
        let object = ["token": token, "environment": environment.rawValue]
        let body = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        switch await post("v1/grant", body: body, timeout: timeout ?? self.timeout) {
        case .success(let answer): return GrantOutcome(answer)
        case .failure: return .failed
        }
    }

    /// Why no answer came.
    struct TransportFailure: CodedError {
        /// False only when the request certainly never reached the relay (no connection was made).
        let requestMayHaveArrived: Bool

        var code: ErrorCode<TransportFailure> {
            requestMayHaveArrived ? ErrorCode("no_answer") : ErrorCode("not_connected")
        }

        var reason: String {
            requestMayHaveArrived
                ? "no answer: the relay may have the request" : "no connection: the request never reached the relay"
        }
    }

    private func post(_ path: String, body: Data, timeout: Duration) async -> Result<RelayAnswer, TransportFailure> {
        var request = URLRequest(url: relay.appendingPathComponent(path))
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        request.timeoutInterval = seconds
        let call = Call()
        return await withTaskCancellationHandler {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<RelayAnswer, TransportFailure>, Never>) in
                let task = session.dataTask(with: request) { data, response, error in
                    if let response = response as? HTTPURLResponse, error == nil {
                        let answer = RelayAnswer(
                            status: response.statusCode, retryAfter: response.value(forHTTPHeaderField: "Retry-After"),
                            body: data ?? Data())
                        continuation.resume(returning: .success(answer))
                    } else {
                        continuation.resume(returning: .failure(Self.failure(error)))
                    }
                }
                call.start(task)
                // URLSession's timeout is an idle timeout; this makes it a deadline for the whole call.
                DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [weak task] in task?.cancel() }
            }
        } onCancel: {
            call.cancel()
        }
    }

    private static func failure(_ error: (any Error)?) -> TransportFailure {
        // Only these mean that no connection to the relay was made, so it cannot have the push.
        let neverConnected: Set<URLError.Code> = [
            .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet, .badURL, .unsupportedURL,
        ]
        guard let code = (error as? URLError)?.code else { return TransportFailure(requestMayHaveArrived: true) }
        return TransportFailure(requestMayHaveArrived: !neverConnected.contains(code))
    }

    /// The task of one call, so that cancelling the calling Swift task cancels it.
    private final class Call: @unchecked Sendable {
        // @unchecked: `task` and `cancelled` are only touched under `lock`.
        private let lock = NSLock()
        private var task: URLSessionDataTask?
        private var cancelled = false

        func start(_ task: URLSessionDataTask) {
            lock.lock()
            self.task = task
            let cancelled = self.cancelled
            lock.unlock()
            task.resume()
            if cancelled { task.cancel() }
        }

        func cancel() {
            lock.lock()
            cancelled = true
            let task = self.task
            lock.unlock()
            task?.cancel()
        }
    }
}

/// The session's delegate, for its one call: the session has become invalid (``RelayClient/close()`` waits for it).
private final class SessionEnd: NSObject, URLSessionDelegate, @unchecked Sendable {
    // @unchecked: NSObject is not Sendable; this class's only state is behind `state`'s Mutex.
    private struct State {
        var ended = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    func urlSession(_ session: URLSession, didBecomeInvalidWithError error: (any Error)?) {
        let waiting = state.withLock { state in
            state.ended = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    /// Returns once the session has become invalid.
    func ended() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = state.withLock { state in
                if !state.ended { state.waiting.append(continuation) }
                return state.ended
            }
            if ended { continuation.resume() }
        }
    }
}
