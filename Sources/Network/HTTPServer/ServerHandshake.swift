import MonotonicTime
import TLS

/// The TLS phase of a server connection (docs/DESIGN.md, "TLS"), pure: `handshaking → open`, or closed with the
/// kind of failure an operator counts. It comes before the connection's ``HTTP1Conversation`` and shares its first
/// deadline: the handshake is part of the first request's deadline (`server.connection_timeout_s` from the accept),
/// so a client that connects and sends nothing, or stalls inside the handshake, is cut off like a slow request.
///
/// The shell hands the client's bytes to TLS and reports each handshake step; the machine decides, from the bytes
/// and the time it is given, whether to go on, open, or close. It never sees a key or a record's content, only
/// whether the first bytes begin a TLS handshake record: anything else (a plain HTTP request on the TLS port)
/// closes the connection without waiting for TLS to say so.
///
/// Public for the fuzz package (Fuzz/, `FuzzServerHandshake`), which drives it with a real TLS session as the
/// shell does.
public struct ServerHandshake: Sendable, Equatable {
    /// Why a handshake failed, in the kinds `duo_relay_tls_handshake_failures_total{kind}` counts.
    public enum Failure: String, Sendable, Equatable, CaseIterable {
        /// Bytes that are not TLS, or a hello with nothing in common with the relay's (an old version, no shared
        /// cipher or group), or records that break the protocol.
        case `protocol`
        /// ALPN offered without `http/1.1`.
        case alpn
        /// The deadline passed first.
        case timeout
        /// Anything else: the client's alert (it refused the certificate), its close part-way, a local failure.
        case other
    }

    /// A step of the handshake, as TLS reported it.
    public enum Step: Sendable, Equatable {
        case done
        /// Waiting for more of the client's records.
        case inProgress
        case failed(Failure)
    }

    /// What the shell does.
    public enum Action: Sendable, Equatable {
        /// Hands the bytes just received to TLS, takes a handshake step and reports it (``stepped(_:now:)``).
        case step
        /// Waits for the client's next bytes, with the timer at `deadline`.
        case wait(deadline: Instant)
        /// The handshake is done: the conversation starts (its own deadlines from here), and the plaintext that came
        /// with the client's last handshake records is read.
        case open
        /// Closes the connection; a failure is counted by its kind (nil: a client that sent nothing and closed, a
        /// port probe, is not a failed handshake).
        case close(Failure?)
    }

    public enum Phase: Sendable, Equatable {
        case handshaking, open, closed
    }

    /// The first bytes of a TLS handshake record: content type 22 (handshake), then the major version 3.
    public static let recordStart: [UInt8] = [0x16, 0x03]

    /// The handshake's deadline: the connection's first, from its accept (sooner once the server stops).
    public private(set) var deadline: Instant
    public private(set) var phase = Phase.handshaking
    /// The server is stopping: a deadline reached now ends a handshake the client was still entitled to, and is not
    /// counted as the client's failure.
    private var draining = false
    /// Bytes received so far, up to the length of ``recordStart`` (checked as they come).
    private var seen = 0

    /// A connection accepted at `now`, whose first deadline is `timeout` nanoseconds away.
    public init(acceptedAt now: Instant, timeout: UInt64) {
        deadline = now + timeout
    }

    /// The first action: wait for the client's hello.
    public var start: Action {
        phase == .handshaking ? .wait(deadline: deadline) : .close(nil)
    }

    /// The client's bytes arrived.
    public mutating func received(_ bytes: UnsafeRawBufferPointer, now: Instant) -> Action {
        guard phase == .handshaking else { return .close(nil) }
        for byte in bytes.prefix(Self.recordStart.count - seen) {
            guard byte == Self.recordStart[seen] else { return close(.protocol) }
            seen += 1
        }
        guard now < deadline else { return draining ? deadlineReached(now: now) : close(.timeout) }
        return .step
    }

    /// The client's bytes arrived, as ``received(_:now:)-(UnsafeRawBufferPointer,_)``.
    public mutating func received(_ bytes: [UInt8], now: Instant) -> Action {
        bytes.withUnsafeBytes { received($0, now: now) }
    }

    /// TLS took a step with the bytes received.
    public mutating func stepped(_ step: Step, now: Instant) -> Action {
        guard phase == .handshaking else { return .close(nil) }
        switch step {
        case .done:
            phase = .open
            return .open
        case .inProgress:
            guard now < deadline else { return deadlineReached(now: now) }
            return .wait(deadline: deadline)
        case .failed(let failure):
            return close(failure)
        }
    }

    /// The timer fired (or woke early).
    public mutating func deadlineReached(now: Instant) -> Action {
        guard phase == .handshaking else { return .close(nil) }
        guard now >= deadline else { return .wait(deadline: deadline) }
        guard !draining else {
            phase = .closed
            return .close(nil)
        }
        return close(.timeout)
    }

    /// The client closed its side before the handshake was done.
    public mutating func peerClosed() -> Action {
        guard phase == .handshaking else { return .close(nil) }
        phase = .closed
        return .close(seen == 0 ? nil : .other)
    }

    /// The server is stopping. A client still handshaking connected before the stop, as a plain client whose
    /// request is on its way did: it gets `wait` nanoseconds more at most to finish, and its request is then answered
    /// (and the connection closed) as any request on its way is. A restart on a socket the service manager holds
    /// therefore fails no client that had already connected.
    public mutating func drain(now: Instant, wait: UInt64) -> Action {
        guard phase == .handshaking else { return .close(nil) }
        draining = true
        deadline = min(deadline, now + wait)
        return .wait(deadline: deadline)
    }

    private mutating func close(_ failure: Failure) -> Action {
        phase = .closed
        return .close(failure)
    }
}

extension ServerHandshake.Failure {
    /// The kind of a failure TLS reported.
    public init(_ failure: TLSHandshake.AcceptFailure) {
        switch failure {
        case .protocol: self = .protocol
        case .alpn: self = .alpn
        case .other: self = .other
        }
    }
}
