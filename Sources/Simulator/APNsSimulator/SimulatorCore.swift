import Foundation
import Synchronization
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// What every event loop shares: configuration, TLS context, and the state tests read
/// (fault queue, deliveries, statistics) behind one lock.
final class SimulatorCore: Sendable {
    let configuration: SimulatorConfiguration
    let tls: TLSServerContext
    let verifier: ProviderTokenVerifier
    /// The record file, opened for appending, or -1.
    let recordFD: Int32
    let connectionCounter = Atomic<Int>(0)
    let state = Mutex(State())

    struct State {
        /// Queued faults with how many requests each still applies to, oldest first.
        var faults: [(fault: SimulatorFault, remaining: Int)] = []
        var defaultFault: SimulatorFault?
        /// Chooses a fault from where a request stands, before queued and default faults.
        var faultPlan: (@Sendable (SimulatorFaultContext) -> SimulatorFault?)?
        /// Faults for every valid request to one device token, before any other fault.
        var tokenFaults: [String: SimulatorFault] = [:]
        /// The latest deliveries, oldest first: `delivered.suffix(retained)` is what is kept; the
        /// array is trimmed when it reaches twice that, so appending stays O(1) amortized.
        var delivered: [DeliveredNotification] = []
        var retained = 10_000
        var statistics = SimulatorStatistics()
        var tokensSeen: Set<String> = []

        mutating func recordDelivery(_ notification: DeliveredNotification) {
            statistics.delivered += 1
            delivered.append(notification)
            if delivered.count >= 2 * retained { delivered.removeFirst(delivered.count - retained) }
        }

        /// The retained deliveries, oldest first.
        var retainedDeliveries: [DeliveredNotification] { Array(delivered.suffix(retained)) }

        /// The fault for a request (a plain HTTP/2 request has no device token), in order: the token's, the
        /// plan's, the queue's, the default.
        mutating func takeFault(for deviceToken: String?, _ context: @autoclosure () -> SimulatorFaultContext)
            -> SimulatorFault?
        {
            if !tokenFaults.isEmpty, let deviceToken, let fault = tokenFaults[deviceToken] { return fault }
            if let faultPlan, let fault = faultPlan(context()) { return fault }
            guard !faults.isEmpty else { return defaultFault }
            let fault = faults[0].fault
            faults[0].remaining -= 1
            if faults[0].remaining == 0 { faults.removeFirst() }
            return fault
        }
    }

    /// A request after validation, before faults are applied.
    struct Validated {
        enum Outcome {
            case rejected(status: Int, reason: String)
            case accepted(DeliveredNotification)
            /// A plain HTTP/2 simulator's request (``SimulatorConfiguration/responder``), never rejected.
            case plain(SimulatorRequest)
        }
        let stream: Int32
        let path: String
        let apnsID: String
        let outcome: Outcome
    }

    /// What the connection does with one stream.
    enum Decision {
        case answer(stream: Int32, status: Int, reason: String, apnsID: String, body: [UInt8])
        case deliver(DeliveredNotification)
        /// A plain HTTP/2 request for the responder to answer, now or after a delay.
        case respond(SimulatorRequest, after: Duration?)
        case stall(stream: Int32)
        case delay(Duration, DeliveredNotification)
        /// GOAWAY with `lastStreamID`; `reset` when a higher stream was already processed, so the
        /// last-stream-id alone cannot mark this one unprocessed.
        case goaway(stream: Int32, lastStreamID: Int32, reset: Bool)
        case reset(stream: Int32)
        case drop
        /// Close with a TCP reset.
        case resetConnection
    }

    init(configuration: SimulatorConfiguration) throws {
        self.configuration = configuration
        state.withLock { $0.retained = max(configuration.retainedDeliveries, 0) }
        do {
            tls = try TLSServerContext(
                certificatePEM: configuration.certificatePEM, privateKeyPEM: configuration.privateKeyPEM)
        } catch {
            throw SimulatorError(error.code == .invalidCertificate ? .invalidCertificate : .openSSL, error.reason)
        }
        verifier = ProviderTokenVerifier(teamID: configuration.teamID, keys: configuration.keys)
        if let path = configuration.recordFile {
            let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                throw SimulatorError(.recordFile, "cannot open the record file: \(String(cString: strerror(errno)))")
            }
            recordFD = fd
        } else {
            recordFD = -1
        }
    }

    deinit {
        if recordFD >= 0 { close(recordFD) }
    }

    /// Seconds since 1970 by the configured clock.
    func nowSeconds() -> Int64 {
        Int64(configuration.now().timeIntervalSince1970.rounded(.down))
    }

    func connectionAccepted() -> Int {
        state.withLock { $0.statistics.connectionsAccepted += 1 }
        return connectionCounter.add(1, ordering: .relaxed).newValue
    }

    func noteTokens(_ tokens: [String], peakStreams: Int) {
        state.withLock { state in
            for token in tokens { state.tokensSeen.insert(token) }
            state.statistics.distinctProviderTokens = state.tokensSeen.count
            state.statistics.maxConcurrentStreamsSeen = max(state.statistics.maxConcurrentStreamsSeen, peakStreams)
        }
    }

    /// Per-connection stream bookkeeping that faults need.
    struct StreamProgress {
        /// The last-stream-id of a GOAWAY this connection sent; requests above it are ignored.
        var goawayLastStreamID: Int32?
        /// The highest stream id processed (decided) so far.
        var highestProcessed: Int32 = 0
        /// Requests taken (decided) so far: a fault plan's ``SimulatorFaultContext/request``.
        var requestsTaken = 0
    }

    /// Applies faults to a batch of validated requests of one connection, in order, under one lock.
    ///
    /// Requests above an earlier GOAWAY's last-stream-id are ignored (not counted, no fault
    /// consumed). A drop or reset ends the batch.
    func decide(_ batch: [Validated], connection: Int, progress: inout StreamProgress) -> [Decision] {
        var decisions: [Decision] = []
        decisions.reserveCapacity(batch.count)
        let timestamp = Int64((configuration.now().timeIntervalSince1970 * 1000).rounded(.down))
        state.withLock { state in
            for item in batch {
                if let last = progress.goawayLastStreamID, item.stream > last { continue }
                state.statistics.requests += 1
                progress.requestsTaken += 1
                let previous = progress.highestProcessed
                progress.highestProcessed = max(previous, item.stream)
                let context = SimulatorFaultContext(
                    connection: connection, request: progress.requestsTaken, path: item.path)
                let fault: SimulatorFault
                switch item.outcome {
                case .rejected(let status, let reason):
                    decisions.append(
                        .answer(
                            stream: item.stream, status: status, reason: reason, apnsID: item.apnsID,
                            body: Self.errorBody(reason: reason, timestamp: nil)))
                    continue
                case .accepted(let notification):
                    let byPrefix = TokenFault.fault(for: notification.deviceToken, in: configuration.tokenFaults)
                    guard let found = byPrefix ?? state.takeFault(for: notification.deviceToken, context) else {
                        state.recordDelivery(notification)
                        decisions.append(.deliver(notification))
                        continue
                    }
                    fault = found
                case .plain(let request):
                    guard let found = state.takeFault(for: nil, context) else {
                        decisions.append(.respond(request, after: nil))
                        continue
                    }
                    fault = found
                }
                switch fault {
                case .status(let status, let reason):
                    decisions.append(
                        .answer(
                            stream: item.stream, status: status, reason: reason, apnsID: item.apnsID,
                            body: Self.errorBody(reason: reason, timestamp: status == 410 ? timestamp : nil)))
                case .stall:
                    decisions.append(.stall(stream: item.stream))
                case .delay(let duration):
                    switch item.outcome {
                    case .accepted(let notification): decisions.append(.delay(duration, notification))
                    case .plain(let request): decisions.append(.respond(request, after: duration))
                    case .rejected: break
                    }
                case .goaway:
                    // Only streams processed before this one are covered by the GOAWAY.
                    progress.goawayLastStreamID = previous
                    state.statistics.goawaysSent += 1
                    decisions.append(
                        .goaway(stream: item.stream, lastStreamID: previous, reset: previous > item.stream))
                case .resetStream:
                    state.statistics.streamsRefused += 1
                    decisions.append(.reset(stream: item.stream))
                case .dropConnection:
                    state.statistics.connectionsDropped += 1
                    decisions.append(.drop)
                    return
                case .resetConnection:
                    state.statistics.connectionsDropped += 1
                    decisions.append(.resetConnection)
                    return
                }
            }
        }
        return decisions
    }

    /// Records a notification delivered after a delay.
    func deliverLate(_ notification: DeliveredNotification) {
        state.withLock { $0.recordDelivery(notification) }
    }

    /// Writes deliveries to the record file and calls `onDeliver`, outside the lock.
    func publish(_ notifications: [DeliveredNotification]) {
        guard !notifications.isEmpty else { return }
        if recordFD >= 0 {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            var lines: [UInt8] = []
            for notification in notifications {
                if let line = try? encoder.encode(notification) {
                    lines.append(contentsOf: line)
                    lines.append(UInt8(ascii: "\n"))
                }
            }
            lines.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(recordFD, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 && errno == EINTR { continue }
                    if written <= 0 { break }
                    offset += written
                }
            }
        }
        if let onDeliver = configuration.onDeliver {
            for notification in notifications { onDeliver(notification) }
        }
    }

    static func errorBody(reason: String, timestamp: Int64?) -> [UInt8] {
        // Reasons are fixed ASCII names chosen by this module or by tests; escape quotes anyway.
        let escaped = reason.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        if let timestamp {
            return Array("{\"reason\":\"\(escaped)\",\"timestamp\":\(timestamp)}".utf8)
        }
        return Array("{\"reason\":\"\(escaped)\"}".utf8)
    }
}
