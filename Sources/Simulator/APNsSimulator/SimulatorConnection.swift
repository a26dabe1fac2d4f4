import CNGHTTP2
import EventLoops
import Foundation
import HTTP2Sessions
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// One client connection: its ``EventLoops/TCPConnection``, OpenSSL on two memory BIOs over it, and its nghttp2
/// server session. The loop reads into its buffer and this feeds the read BIO; what OpenSSL writes into the
/// write BIO is written to the connection.
///
/// Owned by its `TCPConnection` (as its delegate) and used only on its loop's thread. The nghttp2 session's
/// context pointer names this object unretained (``HTTP2Session``'s rule): `close` deletes the session, and
/// `deinit` does if `close` never ran.
final class SimulatorConnection: TCPConnectionDelegate {
    let id: Int
    let ssl: TLSSession
    private let connection: TCPConnection
    private let loop: SimulatorLoop
    private var core: SimulatorCore { loop.core }
    /// A plain HTTP/2 simulator's connection (``SimulatorConfiguration/responder``).
    private var responder: (@Sendable (SimulatorRequest) -> SimulatorResponse)? { core.configuration.responder }
    /// Whether this is a plain HTTP/2 simulator's connection: no token, no APNs checks, every header kept.
    let isPlain: Bool
    private var session: OpaquePointer?
    /// Requests by stream id, from their first HEADERS until nghttp2 closes the stream.
    var streams: [Int32: NotificationRequest] = [:]
    /// Streams whose request ended (END_STREAM), in arrival order, not yet answered.
    var completedStreams: [Int32] = []

    private var writer = FrameWriter()
    /// Reused for every answer's header block.
    private var headerBlock = HeaderBlock()
    /// More than this queued on the connection (a client that does not read): nghttp2's frames wait.
    private static let queueLimit = 1 << 20
    private var tokenState = ProviderTokenVerifier.ConnectionState()
    private var raisedStreamLimit = false
    private var progress = SimulatorCore.StreamProgress()
    private var peakOpenStreams = 0
    private var reportedPeak = 0
    private(set) var isClosed = false

    init(id: Int, connection: TCPConnection, ssl: TLSSession, loop: SimulatorLoop) {
        self.id = id
        self.connection = connection
        self.ssl = ssl
        self.loop = loop
        isPlain = loop.core.configuration.responder != nil
    }

    // MARK: events

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        guard !isClosed else { return }
        ssl.receive(bytes)
        handle()
    }

    func connectionDidReachEnd(_ connection: TCPConnection) {
        // The client is gone (its end of stream).
        close(graceful: false)
    }

    func connection(_ connection: TCPConnection, didFail error: LoopError) {
        close(graceful: false)
    }

    func connectionDidFinishWriting(_ connection: TCPConnection) {
        guard !isClosed else { return }
        flush()
        finishIfDone()
    }

    func connectionDidClose(_ connection: TCPConnection) {
        close(graceful: false)
    }

    private func handle() {
        guard !isClosed else { return }
        if session == nil {
            handshake()
            guard session != nil, !isClosed else { return }
        }
        readAvailable()
        guard !isClosed else { return }
        processCompletedStreams()
        guard !isClosed else { return }
        flush()
        finishIfDone()
    }

    private func handshake() {
        let step = ssl.handshake()
        writeTLSOutput()
        switch step {
        case .done:
            break
        case .wantsReadable, .wantsWritable:
            return
        case .certificateRejected, .failed:
            close(graceful: false)
            return
        }
        guard ssl.agreed(on: ALPN.http2) else {
            close(graceful: false)
            return
        }
        guard let created = HTTP2Session.make(.server, callbacks: loop.callbacks, owner: self) else {
            close(graceful: false)
            return
        }
        session = created
        // A plain HTTP/2 simulator asks for no token: its streams are allowed at once.
        submitSettings(
            maxConcurrentStreams: isPlain
                ? core.configuration.maxConcurrentStreams : core.configuration.initialMaxConcurrentStreams)
        // Let many requests' bodies arrive without waiting for connection-level WINDOW_UPDATEs.
        _ = nghttp2_session_set_local_window_size(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, 16 << 20)
    }

    private func readAvailable() {
        guard let session else { return }
        let buffer = loop.readBuffer
        while !isClosed {
            let result = ssl.read(into: buffer)
            if case .read(let count) = result {
                let consumed = nghttp2_session_mem_recv(
                    session, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count)
                if consumed < 0 {
                    flush()
                    close(graceful: false)
                    return
                }
                if completedStreams.count >= 256 {
                    processCompletedStreams()
                    flush()
                }
                continue
            }
            switch result {
            case .wantsMore:
                // Everything read so far is decrypted; TLS may have answered something (a key update).
                writeTLSOutput()
                return
            default:
                // Close notify or a TLS error: the client is gone.
                close(graceful: false)
                return
            }
        }
    }

    // MARK: nghttp2 callback entry points

    func streamOpened(_ stream: Int32) {
        streams[stream] = NotificationRequest(keepsEverything: isPlain)
        peakOpenStreams = max(peakOpenStreams, streams.count)
    }

    func streamEnded(_ stream: Int32) {
        if streams[stream] != nil { completedStreams.append(stream) }
    }

    /// A PING from the client (nghttp2 answers it).
    func pingReceived() {
        core.state.withLock { $0.statistics.pingsReceived += 1 }
    }

    func streamClosed(_ stream: Int32) {
        streams[stream] = nil
    }

    /// Copies the next part of a stream's answer body into nghttp2's buffer.
    func readResponseBody(
        stream: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        streams[stream]?.response.copyNext(into: buffer, length: length, flags: flags)
            ?? OutgoingBody.nothingMore(flags: flags)
    }

    // MARK: requests

    private func processCompletedStreams() {
        guard !completedStreams.isEmpty, session != nil else {
            reportPeakIfNeeded(tokens: [])
            return
        }
        let completed = completedStreams
        completedStreams.removeAll(keepingCapacity: true)
        let now = core.nowSeconds()
        var batch: [SimulatorCore.Validated] = []
        batch.reserveCapacity(completed.count)
        var newTokens: [String] = []
        var tokenAccepted = false
        for stream in completed {
            guard let request = streams[stream] else { continue }
            if let last = progress.goawayLastStreamID, stream > last { continue }
            let path = request.headers[":path"] ?? ""
            if isPlain {
                let plain = SimulatorRequest(
                    method: request.headers[":method"] ?? "", path: path, headers: request.otherHeaders,
                    body: request.body, connection: id, stream: stream)
                batch.append(SimulatorCore.Validated(stream: stream, path: path, apnsID: "", outcome: .plain(plain)))
                continue
            }
            let authorization = request.headers["authorization"]
            if let authorization, authorization != tokenState.lastPresented {
                tokenState.lastPresented = authorization
                newTokens.append(authorization)
            }
            let apnsID = NotificationRequestValidator.requestedID(request) ?? APNsIdentifier.random()
            let outcome: SimulatorCore.Validated.Outcome
            switch core.verifier.check(authorization: authorization, now: now, state: &tokenState) {
            case .rejected(let status, let reason):
                outcome = .rejected(status: status, reason: reason)
            case .valid(let keyID):
                tokenAccepted = true
                switch NotificationRequestValidator.validate(request, topics: core.configuration.topics) {
                case .failure(let rejection):
                    outcome = .rejected(status: rejection.status, reason: rejection.reason)
                case .success(let fields):
                    outcome = .accepted(
                        DeliveredNotification(
                            apnsID: apnsID, deviceToken: fields.deviceToken, topic: fields.topic,
                            pushType: fields.pushType, priority: fields.priority, collapseID: fields.collapseID,
                            expiration: fields.expiration, payload: fields.payload, connection: id, stream: stream,
                            keyID: keyID))
                }
            }
            batch.append(SimulatorCore.Validated(stream: stream, path: path, apnsID: apnsID, outcome: outcome))
        }
        if tokenAccepted && !raisedStreamLimit {
            raisedStreamLimit = true
            submitSettings(maxConcurrentStreams: core.configuration.maxConcurrentStreams)
        }
        reportPeakIfNeeded(tokens: newTokens)
        let decisions = core.decide(batch, connection: id, progress: &progress)
        var delivered: [DeliveredNotification] = []
        for decision in decisions {
            switch decision {
            case .answer(let stream, let status, let reason, let apnsID, let body):
                if status == 403 && reason == "ExpiredProviderToken" { tokenState.mayUpdateAtOnce = true }
                submitResponse(stream: stream, status: status, apnsID: apnsID, body: body)
            case .deliver(let notification):
                submitResponse(stream: notification.stream, status: 200, apnsID: notification.apnsID, body: [])
                delivered.append(notification)
            case .respond(let request, nil):
                respond(to: request)
            case .respond(let request, let delay?):
                loop.schedule(after: delay) { [self] in
                    guard !isClosed, streams[request.stream] != nil else { return }
                    respond(to: request)
                    flush()
                    finishIfDone()
                }
            case .stall:
                break
            case .delay(let duration, let notification):
                loop.schedule(after: duration) { [self] in answerDelayed(notification) }
            case .goaway(let stream, let lastStreamID, let reset):
                var debugData: [UInt8] = []
                if let reason = core.configuration.goawayReason {
                    debugData = SimulatorCore.errorBody(reason: reason, timestamp: nil)
                }
                _ = nghttp2_submit_goaway(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID, NGHTTP2_NO_ERROR.rawValue, debugData,
                    debugData.count)
                if reset {
                    _ = nghttp2_submit_rst_stream(
                        session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, NGHTTP2_REFUSED_STREAM.rawValue)
                }
            case .reset(let stream):
                _ = nghttp2_submit_rst_stream(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, NGHTTP2_REFUSED_STREAM.rawValue)
            case .drop:
                core.publish(delivered)
                flush()
                close(graceful: false)
                return
            case .resetConnection:
                core.publish(delivered)
                close(graceful: false, resetting: true)
                return
            }
        }
        core.publish(delivered)
    }

    private func reportPeakIfNeeded(tokens: [String]) {
        guard !tokens.isEmpty || peakOpenStreams > reportedPeak else { return }
        reportedPeak = peakOpenStreams
        core.noteTokens(tokens, peakStreams: peakOpenStreams)
    }

    /// A delayed notification's time has come: deliver it if the client still waits.
    func answerDelayed(_ notification: DeliveredNotification) {
        guard !isClosed, streams[notification.stream] != nil else { return }
        core.deliverLate(notification)
        submitResponse(stream: notification.stream, status: 200, apnsID: notification.apnsID, body: [])
        core.publish([notification])
        flush()
        finishIfDone()
    }

    private func submitSettings(maxConcurrentStreams: UInt32) {
        var entries = [
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: maxConcurrentStreams)
        ]
        _ = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
    }

    /// Answers a plain HTTP/2 request with what the responder returns.
    private func respond(to request: SimulatorRequest) {
        guard let responder else { return }
        let response = responder(request)
        submitResponse(
            stream: request.stream, status: response.status,
            headers: response.headers.map { (name: $0.name, value: $0.value) }, body: response.body)
    }

    private func submitResponse(stream: Int32, status: Int, apnsID: String, body: [UInt8]) {
        var fields: [(name: String, value: String)] = [("apns-id", apnsID)]
        if !body.isEmpty {
            fields.append(("content-type", "application/json"))
            fields.append(("content-length", String(body.count)))
        }
        submitResponse(stream: stream, status: status, headers: fields, body: body)
    }

    private func submitResponse(stream: Int32, status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        guard let session, let request = streams[stream] else { return }
        request.response = OutgoingBody(body)
        headerBlock.setResponse(status: status, headers: headers)
        headerBlock.withFields { pairs, count in
            if body.isEmpty {
                _ = nghttp2_submit_response(session, stream, pairs, count, nil)
            } else {
                var provider = nghttp2_data_provider(
                    source: nghttp2_data_source(ptr: nil), read_callback: SimulatorCallbacks.readResponseBody)
                _ = nghttp2_submit_response(session, stream, pairs, count, &provider)
            }
        }
    }

    // MARK: output

    /// Serializes what nghttp2 has to send through TLS and writes it, unless the client has not read
    /// `queueLimit` bytes of earlier answers (then `connectionDidFinishWriting` resumes).
    private func flush() {
        guard let session, !isClosed, connection.queuedByteCount < Self.queueLimit else { return }
        switch writer.flush(session: session, ssl: ssl) {
        case .done, .wantsWritable, .wantsReadable: writeTLSOutput()
        case .failed: close(graceful: false)
        }
    }

    /// Moves what OpenSSL wrote into the write BIO onto the connection.
    private func writeTLSOutput() {
        ssl.flushOutput(through: loop.writeBuffer) { connection.write($0) }
    }

    /// Closes the connection once nghttp2 is done, or once a GOAWAY's earlier streams are answered.
    private func finishIfDone() {
        guard let session, !isClosed, connection.queuedWriteCount == 0, !writer.hasPending else { return }
        if let last = progress.goawayLastStreamID {
            if !streams.keys.contains(where: { $0 <= last }) && nghttp2_session_want_write(session) == 0 {
                close(graceful: true)
            }
        } else if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            close(graceful: true)
        }
    }

    /// Closes the connection; `graceful` first sends a TLS close_notify. What was written before still
    /// reaches the client, then a FIN; `resetting` drops what is queued and sends a TCP reset instead.
    /// Idempotent.
    func close(graceful: Bool, resetting: Bool = false) {
        guard !isClosed else { return }
        isClosed = true
        if graceful {
            ssl.shutdown()
            writeTLSOutput()
        }
        OpenSSLErrorQueue.clear()
        if resetting {
            connection.reset()
        } else {
            connection.closeAfterWriting()
        }
        ssl.free()  // frees both BIOs
        reportPeakIfNeeded(tokens: [])
        if let session {
            nghttp2_session_del(session)
            self.session = nil
        }
        streams.removeAll()
        completedStreams.removeAll()
    }

    deinit {
        // Only a connection that never closed still has these (`HTTP2Session`'s rule).
        if !isClosed {
            if let session { nghttp2_session_del(session) }
            ssl.free()
        }
    }
}
