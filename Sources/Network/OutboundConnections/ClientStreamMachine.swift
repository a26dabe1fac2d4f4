import HTTP1
import MonotonicTime

/// What a ``ClientStream`` decides, without I/O: `connecting → tunnelling → handshaking → open`, then `ending →
/// closed`. It resolves the host (or the proxy's), tries each address in turn, asks a proxy for a tunnel and reads its
/// answer, runs the TLS handshake's steps, bounds the whole set-up by a deadline, and ends once.
///
/// Each input returns the actions the shell carries out, in order. Time comes in with the inputs (monotonic
/// nanoseconds); the machine keeps no clock.
public struct ClientStreamMachine: Sendable {
    /// An HTTP proxy the stream goes through: `CONNECT host:port`, then everything else inside the tunnel.
    public struct Proxy: Sendable, Equatable {
        public let host: String
        public let port: UInt16
        /// The whole `Proxy-Authorization` value (`Basic ...`), or nil. Sent, never shown.
        let authorization: String?

        /// - Parameter authorization: the `Proxy-Authorization` header's value, for example `Basic dXNlcjpwYXNz`.
        public init(host: String, port: UInt16, authorization: String? = nil) {
            self.host = host
            self.port = port
            self.authorization = authorization
        }

        /// `host:port` (an IPv6 literal in brackets): how lines name the proxy. Carries no credential.
        public var name: String { Self.authority(host, port) }

        static func authority(_ host: String, _ port: UInt16) -> String {
            (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
        }

        /// The request that asks for a tunnel to `host:port`, by name (the proxy resolves it).
        func connectRequest(host: String, port: UInt16) -> [UInt8] {
            let target = Self.authority(host, port)
            var text = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
            if let authorization { text += "Proxy-Authorization: \(authorization)\r\n" }
            text += "\r\n"
            return Array(text.utf8)
        }
    }

    /// Where the stream is, as its owner may ask.
    public enum Phase: Sendable, Equatable {
        case resolving, connecting, tunnelling, handshaking, open, ending, closed
    }

    /// A step of the TLS handshake, as OpenSSL reported it.
    public enum HandshakeStep: Sendable, Equatable {
        case done
        /// Waiting for the server's records.
        case inProgress
        case certificateRejected(String)
        case failed(String)
    }

    /// What the shell does, in the order given.
    public enum Action: Sendable, Equatable {
        /// Resolves `host` (an IP literal directly); the answer comes back as ``resolved(addressCount:)`` or
        /// ``resolveFailed(_:)``.
        case resolve(host: String, port: UInt16)
        /// Fires ``timerFired(now:)`` at this instant.
        case armTimer(at: Instant)
        case cancelTimer
        /// Opens a TCP connection to the resolved address at this index.
        case connect(address: Int)
        /// Forgets the connection that failed to connect (it closes by itself).
        case abandonConnection
        /// Starts reading the connected TCP connection, with TCP keep-alive (a server that vanished is found even
        /// while nothing is sent).
        case startReading
        /// Writes these bytes on the TCP connection as they are (the request to the proxy).
        case writePlain([UInt8])
        /// Sets up TLS, takes the handshake's first step (``handshake(_:)``), then reads `leftover` as the server's
        /// records if the handshake goes on.
        case startTLS(leftover: [UInt8])
        /// Tells the owner the stream is open, then sends what it wrote before.
        case open
        /// Hands these bytes to the owner as read (a stream without TLS).
        case deliver([UInt8])
        /// Tells the owner the stream failed.
        case fail(ClientStreamFailure)
        /// With TLS a close_notify; then closes the connection once everything is written.
        case closeGracefully
        /// Resets the TCP connection if there is one (its close follows as ``connectionClosed()``), else
        /// calls ``connectionClosed()`` on the loop's next turn.
        case end
        /// Tells the owner the stream has closed, and lets it go.
        case finish
    }

    /// What becomes of bytes the owner writes.
    public enum Writing: Sendable, Equatable {
        /// Sent now.
        case send
        /// Kept until the stream is open.
        case keep
        /// Dropped: the stream has ended.
        case drop
    }

    private enum State: Sendable {
        case idle
        case resolving
        case connecting(count: Int, next: Int, lastReason: String)
        case tunnelling(HTTP1ResponseReader)
        case handshaking
        /// `writeFailure`: a write failed because the peer closed; what it sent is still read, and the failure is
        /// reported at the end of input.
        case open(writeFailure: String?)
        case ending
        case closed
    }

    private let host: String
    private let port: UInt16
    private let usesTLS: Bool
    private let proxy: Proxy?
    /// The set-up (everything before open) fails at this instant.
    private let deadline: Instant?
    private var state = State.idle

    /// - Parameters:
    ///   - host: the server's name or address (through a proxy: sent to the proxy, which resolves it).
    ///   - usesTLS: whether TLS runs once connected (through a proxy: inside the tunnel).
    ///   - deadline: the instant the set-up must be done by, or nil for none.
    public init(host: String, port: UInt16, usesTLS: Bool, proxy: Proxy? = nil, deadline: Instant? = nil) {
        self.host = host
        self.port = port
        self.usesTLS = usesTLS
        self.proxy = proxy
        self.deadline = deadline
    }

    public var phase: Phase {
        switch state {
        case .idle, .resolving: .resolving
        case .connecting: .connecting
        case .tunnelling: .tunnelling
        case .handshaking: .handshaking
        case .open: .open
        case .ending: .ending
        case .closed: .closed
        }
    }

    /// Connected (through the tunnel and the handshake) and not ending.
    public var isOpen: Bool {
        if case .open = state { true } else { false }
    }

    public var writing: Writing {
        switch state {
        case .idle, .resolving, .connecting, .tunnelling, .handshaking: .keep
        case .open(let writeFailure): writeFailure == nil ? .send : .drop
        case .ending, .closed: .drop
        }
    }

    // MARK: Connecting

    /// Begins: resolves the server's host, or the proxy's.
    public mutating func start(now: Instant) -> [Action] {
        guard case .idle = state else { return [] }
        state = .resolving
        var actions: [Action] = [.resolve(host: proxy?.host ?? host, port: proxy?.port ?? port)]
        if let deadline { actions.append(.armTimer(at: deadline)) }
        return actions
    }

    public mutating func resolved(addressCount: Int) -> [Action] {
        guard case .resolving = state else { return [] }
        state = .connecting(count: addressCount, next: 0, lastReason: "")
        return connectNext()
    }

    public mutating func resolveFailed(_ reason: String) -> [Action] {
        guard case .resolving = state else { return [] }
        if let proxy {
            return fail(.resolve, "proxy \(proxy.name) cannot be resolved: \(reason)", tunnel: .unreachable)
        }
        return fail(.resolve, reason)
    }

    private mutating func connectNext() -> [Action] {
        guard case .connecting(let count, let next, let lastReason) = state else { return [] }
        guard next < count else {
            let reason = lastReason.isEmpty ? "cannot connect" : lastReason
            if let proxy {
                return fail(.connect, "proxy \(proxy.name) cannot be reached: \(reason)", tunnel: .unreachable)
            }
            return fail(.connect, reason)
        }
        state = .connecting(count: count, next: next + 1, lastReason: lastReason)
        return [.connect(address: next)]
    }

    /// The TCP connection to the address tried last failed (or could not even start): the next address is tried.
    public mutating func connectFailed(_ reason: String) -> [Action] {
        guard case .connecting(let count, let next, _) = state else { return [] }
        state = .connecting(count: count, next: next, lastReason: reason)
        return [.abandonConnection] + connectNext()
    }

    /// The TCP connection is up.
    public mutating func connected() -> [Action] {
        guard case .connecting = state else { return [] }
        if let proxy {
            state = .tunnelling(HTTP1ResponseReader())
            return [.startReading, .writePlain(proxy.connectRequest(host: host, port: port))]
        }
        return [.startReading] + afterConnecting(leftover: [])
    }

    /// TLS, or the stream is open; `leftover`: bytes the server sent already (after a proxy's answer).
    private mutating func afterConnecting(leftover: [UInt8]) -> [Action] {
        if usesTLS {
            state = .handshaking
            return [.startTLS(leftover: leftover)]
        }
        state = .open(writeFailure: nil)
        return [.cancelTimer, .open] + (leftover.isEmpty ? [] : [.deliver(leftover)])
    }

    /// Bytes read while tunnelling: the proxy's answer, and maybe the server's first bytes after it. Only the
    /// answer's head is read (a 2xx to `CONNECT` has no body: what follows its blank line is the server's); any
    /// other status, an interim one too, is a refusal named by its status line.
    public mutating func tunnelRead(_ bytes: UnsafeRawBufferPointer) -> [Action] {
        guard case .tunnelling(var reader) = state, let proxy else { return [] }
        state = .ending  // a placeholder while the reader is out of the state (no copy of its buffer)
        reader.append(bytes)
        let event = reader.next()
        state = .tunnelling(reader)
        let refusal: HTTP1ResponseHead
        switch event {
        case .needMoreBytes:
            return []
        case .head(let head) where (200...299).contains(head.status):
            return afterConnecting(leftover: reader.takeBufferedBytes())
        case .head(let head), .interim(let head):
            refusal = head
        case .failed(let error):
            return fail(
                .connect, "proxy \(proxy.name) answered CONNECT with no valid HTTP answer: \(error.reason)",
                tunnel: .malformed)
        case .body, .end:
            return fail(.connect, "proxy \(proxy.name) answered CONNECT with no head", tunnel: .malformed)
        }
        // The reason is printable ASCII (the reader takes no other); a long one is cut.
        let reason = refusal.reason
        let shown =
            reason.count > Self.maximumReasonLength ? String(reason.prefix(Self.maximumReasonLength)) + "..." : reason
        let statusLine = shown.isEmpty ? "\(refusal.status)" : "\(refusal.status) \(shown)"
        return fail(.connect, "proxy \(proxy.name) refused the tunnel: \(statusLine)", tunnel: .refused)
    }

    /// The most characters of a proxy's reason phrase a refusal names.
    static let maximumReasonLength = 100

    /// Bytes read while tunnelling, as ``tunnelRead(_:)-(UnsafeRawBufferPointer)``.
    public mutating func tunnelRead(_ bytes: [UInt8]) -> [Action] {
        bytes.withUnsafeBytes { tunnelRead($0) }
    }

    /// A step of the TLS handshake.
    public mutating func handshake(_ step: HandshakeStep) -> [Action] {
        guard case .handshaking = state else { return [] }
        switch step {
        case .done:
            state = .open(writeFailure: nil)
            return [.cancelTimer, .open]
        case .inProgress:
            return []
        case .certificateRejected(let reason):
            return fail(.certificate, reason)
        case .failed(let reason):
            return fail(.handshake, reason)
        }
    }

    /// The set-up's deadline (or an early wake-up).
    public mutating func timerFired(now: Instant) -> [Action] {
        guard let deadline else { return [] }
        switch state {
        case .idle, .open, .ending, .closed:
            return []
        default:
            break
        }
        if now < deadline { return [.armTimer(at: deadline)] }
        switch state {
        case .tunnelling:
            return tunnelTimedOut()
        case .handshaking:
            return fail(.handshake, "the TLS handshake timed out")
        default:
            if let proxy {
                return fail(.connect, "proxy \(proxy.name) cannot be reached: timed out", tunnel: .unreachable)
            }
            return fail(.connect, "timed out")
        }
    }

    // MARK: The connection's news

    /// The server (or the proxy) closed its side.
    public mutating func reachedEnd() -> [Action] {
        switch state {
        case .tunnelling:
            let name = proxy?.name ?? ""
            return fail(.connect, "proxy \(name) closed the connection before opening the tunnel", tunnel: .closed)
        case .handshaking:
            return fail(.handshake, "the connection closed")
        case .open(let writeFailure):
            if let writeFailure { return fail(.reset, writeFailure) }
            return fail(.closedByPeer, "the server closed the connection")
        default:
            return []
        }
    }

    /// The TCP connection failed: `brokenPipeWhileReading` when a write found the peer closed and reading goes on.
    public mutating func connectionFailed(_ reason: String, brokenPipeWhileReading: Bool = false) -> [Action] {
        switch state {
        case .connecting:
            return connectFailed(reason)
        case .tunnelling:
            let name = proxy?.name ?? ""
            return fail(
                .connect, "proxy \(name) broke the connection before opening the tunnel: \(reason)", tunnel: .closed)
        case .handshaking:
            return fail(.handshake, reason)
        case .open(nil):
            // A write refused because the peer has closed (EPIPE): what it sent before closing may still wait in the
            // socket (an HTTP/2 GOAWAY saying which streams it never processed), and libuv reports the failed write
            // before it reads. Read on to the end of input; the failure is reported then.
            if brokenPipeWhileReading {
                state = .open(writeFailure: reason)
                return []
            }
            return fail(.reset, reason)
        case .open:
            return fail(.reset, reason)
        default:
            return []
        }
    }

    /// TLS could not read (`closeNotify`: the peer closed the TLS session) or write a record once open.
    public mutating func tlsFailed(_ reason: String, closeNotify: Bool = false) -> [Action] {
        guard case .open = state else { return [] }
        if closeNotify { return fail(.closedByPeer, "the server closed the connection") }
        return fail(.tls, reason)
    }

    /// The stream's TCP connection has closed (or, with none, the stream's end came round).
    public mutating func connectionClosed() -> [Action] {
        switch state {
        case .ending:
            state = .closed
            return [.finish]
        case .closed, .connecting:
            return []
        default:
            // Closed under the stream (the loop is stopping): the owner hears a reset, then the close.
            state = .closed
            return [.cancelTimer, .fail(ClientStreamFailure(.reset, "the connection closed")), .finish]
        }
    }

    // MARK: The owner ends it

    /// Ends gracefully once open; at once otherwise.
    public mutating func close() -> [Action] {
        switch state {
        case .ending, .closed:
            return []
        case .open:
            state = .ending
            return [.closeGracefully]
        default:
            state = .ending
            return [.cancelTimer, .end]
        }
    }

    /// Ends at once (a TCP reset once connected).
    public mutating func reset() -> [Action] {
        switch state {
        case .ending, .closed:
            return []
        default:
            state = .ending
            return [.cancelTimer, .end]
        }
    }

    /// The owner stops waiting: the end of ``reset()``, after a failure when a proxy has not answered yet (its
    /// silence is what the owner waited for).
    public mutating func giveUp() -> [Action] {
        if case .tunnelling = state { return tunnelTimedOut() }
        return reset()
    }

    private mutating func tunnelTimedOut() -> [Action] {
        fail(.connect, "proxy \(proxy?.name ?? "") did not answer CONNECT in time", tunnel: .timeout)
    }

    private mutating func fail(
        _ kind: ClientStreamFailure.Kind, _ reason: String, tunnel: ClientStreamFailure.Tunnel? = nil
    ) -> [Action] {
        switch state {
        case .ending, .closed: return []
        default: break
        }
        state = .ending
        return [.cancelTimer, .fail(ClientStreamFailure(kind, reason, tunnel: tunnel)), .end]
    }
}
