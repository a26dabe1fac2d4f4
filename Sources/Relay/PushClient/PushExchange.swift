import DuoRelayClient
import Foundation
import HTTP1

/// `duo-relay push`'s one request and its answer over one connection, as a pure machine: the shell
/// (``PushConnection``) feeds it what the connection did and when the deadline passed, and it says when the
/// exchange is over and how. It knows where a failure happened: before the connection was made (the push
/// never reached the relay) or after the request was written (the relay may have it).
public struct PushExchange: Sendable {
    /// How far the exchange got.
    public enum Stage: Equatable, Sendable {
        /// Resolving, connecting, and with TLS handshaking: nothing of the request has left this host.
        case connecting
        /// Connected and the request written: the relay (or its front) may have it.
        case awaitingAnswer
        case finished
    }

    /// Where a failure happened, in the words `push` prints.
    public enum Failure: Equatable, Sendable {
        /// The relay's certificate did not verify against the roots (OpenSSL's reason).
        case certificateNotTrusted(String)
        /// The TLS handshake failed otherwise (no common protocol, a server that does not speak TLS).
        case handshake(String)
        /// No connection: the name did not resolve, or no address took the TCP connection.
        case noConnection(String)
        /// The deadline passed before a connection (with TLS, a TLS session) was made.
        case timedOutConnecting
        /// The deadline passed after the request was written, before a whole answer came.
        case timedOutAwaitingAnswer
        /// The connection ended after the request was written, before a whole answer came.
        case connectionLost(String)
        /// Bytes came back that are not an HTTP/1.1 answer.
        case malformedAnswer(String)

        /// False only when the request certainly never left this host.
        public var pushMayHaveArrived: Bool {
            switch self {
            case .certificateNotTrusted, .handshake, .noConnection, .timedOutConnecting: false
            case .timedOutAwaitingAnswer, .connectionLost, .malformedAnswer: true
            }
        }
    }

    /// How the exchange ended.
    public enum Result: Equatable, Sendable {
        case answered(RelayAnswer)
        case failed(Failure)
    }

    /// What went wrong with the connection, as the shell reports it.
    public enum ConnectionFailure: Equatable, Sendable {
        case resolve(String)
        case connect(String)
        case certificate(String)
        case handshake(String)
        /// The peer closed the connection (a FIN or TLS close_notify).
        case closedByPeer
        /// A reset, a failed read or write, a bad TLS record.
        case lost(String)
    }

    public private(set) var stage = Stage.connecting
    private var reader = HTTP1ResponseReader(limits: Self.answerLimits)

    /// The answer's bounds: the relay's bodies are below 1 KiB, a front's error page is larger, and an answer
    /// framed by the connection's end (as a front may send) is taken. A misdirected `--relay` cannot fill memory.
    static let answerLimits = HTTP1ResponseReader.Limits(maxBodyBytes: 256 * 1024, bodyMayEndWithConnection: true)

    public init() {}

    /// The connection is open (TLS handshaken): the request is written now.
    public mutating func connected() {
        if stage == .connecting { stage = .awaitingAnswer }
    }

    /// Answer bytes arrived. Returns the result once the exchange is over.
    public mutating func read(_ bytes: UnsafeRawBufferPointer) -> Result? {
        guard stage == .awaitingAnswer else { return nil }
        reader.append(bytes)
        return readAnswer()
    }

    /// The result once the reader holds a whole answer or a malformed one (interim answers skipped).
    private mutating func readAnswer() -> Result? {
        switch reader.nextResponse() {
        case .needMoreBytes, .end: return nil
        case .complete(let head, let body):
            // Repeated fields form one list (RFC 9110, 5.3).
            let retryAfter = head.headers.values("retry-after")
            return finish(
                .answered(
                    RelayAnswer(
                        status: head.status, retryAfter: retryAfter.isEmpty ? nil : retryAfter.joined(separator: ", "),
                        body: Data(body))))
        case .failed(let error): return finish(.failed(.malformedAnswer(error.reason)))
        }
    }

    /// The connection failed or the peer closed it. Returns the result (an answer whose end is the close
    /// completes with it).
    public mutating func failed(_ failure: ConnectionFailure) -> Result? {
        switch stage {
        case .finished:
            return nil
        case .connecting:
            switch failure {
            case .resolve(let reason), .connect(let reason), .lost(let reason):
                return finish(.failed(.noConnection(reason)))
            case .certificate(let reason): return finish(.failed(.certificateNotTrusted(reason)))
            case .handshake(let reason): return finish(.failed(.handshake(reason)))
            case .closedByPeer: return finish(.failed(.handshake("the server closed the connection")))
            }
        case .awaitingAnswer:
            if failure == .closedByPeer {
                reader.finishInput()
                if let answered = readAnswer(), case .answered = answered { return answered }
            }
            switch failure {
            case .closedByPeer: return finish(.failed(.connectionLost("the server closed the connection")))
            case .resolve(let reason), .connect(let reason), .certificate(let reason), .handshake(let reason),
                .lost(let reason):
                return finish(.failed(.connectionLost(reason)))
            }
        }
    }

    /// The call's deadline passed. Returns the result unless the exchange was already over.
    public mutating func deadlinePassed() -> Result? {
        switch stage {
        case .finished: nil
        case .connecting: finish(.failed(.timedOutConnecting))
        case .awaitingAnswer: finish(.failed(.timedOutAwaitingAnswer))
        }
    }

    private mutating func finish(_ result: Result) -> Result {
        stage = .finished
        return result
    }
}
