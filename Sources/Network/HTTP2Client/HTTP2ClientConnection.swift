import CNGHTTP2
import EventLoops
import HTTP2Sessions
import MonotonicTime
import OutboundConnections

/// One HTTP/2 connection to the origin, on the client's event loop: a ``OutboundConnections/ClientStream`` (TLS on
/// memory BIOs over a libuv TCP connection), an nghttp2 client session driven with
/// `nghttp2_session_mem_recv` and `nghttp2_session_mem_send`, and one ``EventLoops/LoopTimer``. The I/O shell
/// around a ``ConnectionStateMachine``, which decides what every event means and keeps the requests,
/// their streams and the pool's report; this type only carries out what each input's result says.
///
/// Loop-bound: made, called and called back on the client's loop thread only.
///
/// Ownership: the ``ClientCore`` holds the connection while the pool counts it; the stream holds it (as
/// its delegate) until the stream has closed, and the timer's handler until the timer is closed (by
/// ``close(graceful:)``, or by the loop when it stops). The
/// connection holds the core until it is closed (``close(graceful:)``), which breaks that cycle. The
/// nghttp2 session's user data names the connection unretained (``HTTP2Session``'s rule); the session is
/// deleted when the connection closes or breaks, never from inside one of its callbacks.
final class HTTP2ClientConnection: ClientStreamDelegate {
    let id: Int
    private var core: ClientCore?
    private let settings: ClientSettings
    private let loop: EventLoop
    private var machine: ConnectionStateMachine
    private var stream: ClientStream?
    private var session: OpaquePointer?
    private var timer: LoopTimer?
    /// Frames serialized by nghttp2, written to the stream in one piece per round.
    private var output: [UInt8] = []
    /// Reused for every request's header block.
    private var headerBlock = HeaderBlock()
    /// Inside an input: what the input leads to (writing, the timer, the report) is done once, as it ends.
    private var depth = 0
    private var closed = false
    /// A round of writing is scheduled for the loop's next turn.
    private var flushScheduled = false

    /// The most bytes gathered from nghttp2 before they are written (TLS cuts them into 16 KiB records).
    private static let batchSize = 64 * 1024

    init(id: Int, core: ClientCore, notBefore: Instant?) {
        self.id = id
        self.core = core
        settings = core.settings
        loop = core.loop
        machine = ConnectionStateMachine(
            timing: settings.timing, notBefore: notBefore, provesConnection: settings.provesConnection,
            retiresConnection: settings.retiresConnection)
        output.reserveCapacity(Self.batchSize + 16 * 1024)
    }

    deinit {
        if let session { nghttp2_session_del(session) }  // the rule in `HTTP2Session`; normally gone already
    }

    // MARK: Inputs from the core

    /// Connects now, or once reconnect pacing is over.
    func begin() {
        input {
            if machine.start(now: now) == .connect { connect() }
        }
    }

    /// Takes a request the pool gave it.
    func accept(_ request: PendingRequest) {
        input { _ = machine.accept(request) }
    }

    /// What the pool has not been told yet.
    func takeReport() -> PoolStateMachine.Report { machine.takeReport() }

    /// The client shuts down: every request here ends with `.shutdown`; the connection closes.
    func shutDown() -> [PoolStateMachine.Ended] {
        let ended = machine.shutDown()
        close(graceful: true)
        return ended
    }

    /// Closes the connection (the pool no longer counts it): with `graceful`, GOAWAY and TLS close_notify
    /// first, without waiting for the server.
    func close(graceful: Bool) {
        guard !closed else { return }
        closed = true
        if graceful, let session, let stream, stream.isOpen {
            _ = nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
            serializeAndWrite(session: session, stream: stream)
        }
        endSession()
        if graceful { stream?.close() } else { stream?.reset() }
        timer?.close()
        timer = nil
        core = nil
    }

    // MARK: Inputs from the stream and the timer

    func streamDidConnect(_ stream: ClientStream) {
        input {
            switch machine.connected(http2Agreed: stream.negotiatedProtocol == "h2", now: now) {
            case .openSession: openSession()
            case .close: stream.reset()
            }
        }
    }

    func stream(_ stream: ClientStream, didRead bytes: UnsafeRawBufferPointer) {
        input {
            guard let session, !bytes.isEmpty else { return }
            machine.received(now: now)
            let consumed = nghttp2_session_mem_recv(
                session, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count)
            // nghttp2's words for its error are taken here: the machine makes no C call.
            let error = consumed < 0 ? HTTP2Session.words(ofError: consumed) : nil
            if machine.read(consumed: consumed, of: bytes.count, error: error) == .breakOff {
                // What nghttp2 queued (a GOAWAY telling the server why) goes before the connection is given up.
                serializeAndWrite(session: session, stream: stream)
                endSession()
                stream.reset()
            }
        }
    }

    func stream(_ stream: ClientStream, didFail failure: ClientStreamFailure) {
        input {
            machine.streamFailed(failure)
            endSession()
        }
    }

    func streamDidClose(_ stream: ClientStream) {
        if self.stream === stream { self.stream = nil }
        // Closed without a failure while the pool still counts it (the loop is stopping): the same as broken.
        guard !closed else { return }
        input {
            machine.streamClosedQuietly()
            endSession()
        }
    }

    private func timerFired() {
        input {
            let result = machine.timerFired(now: now)
            if result.connect { connect() }
            if let session {
                if result.sendPing { _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil) }
                for id in result.cancel {
                    _ = nghttp2_submit_rst_stream(
                        session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_CANCEL.rawValue)
                }
            }
            if result.close {
                endSession()
                // Given up, not reset: a stream still waiting for its proxy's answer says so (the proxy is named).
                stream?.giveUp()
            }
        }
    }

    // MARK: Doing

    /// Runs one input, then, once the outermost input ends: schedules the round of writing, re-arms the
    /// timer, and tells the core when the pool has news (last: the core may close this connection then).
    private func input(_ body: () -> Void) {
        depth += 1
        body()
        depth -= 1
        guard depth == 0, !closed else { return }
        if !flushScheduled, let session,
            inPlace({ $0.canSubmit(limit: submitLimit(session)) }) || nghttp2_session_want_write(session) != 0
        {
            // Written once per turn of the loop, at its start (before it polls): the requests and frames of a
            // whole turn go in one write, and a connection the server has just closed is read (its GOAWAY
            // says which streams it never processed) before a second write could fail on it and end it
            // unread (a write error is reported on the next turn, ahead of reading).
            flushScheduled = true
            loop.enqueue { [self] in writeRound() }
        }
        armTimer()
        if inPlace({ $0.hasReport }) { core?.connectionHasReport(self) }
    }

    /// Asks the machine something where it is stored: a non-mutating call on this class's stored machine copies
    /// the whole machine first (a retain and a release per reference it holds), three times a push.
    private func inPlace<Result>(_ question: (inout ConnectionStateMachine) -> Result) -> Result {
        question(&machine)
    }

    private func writeRound() {
        flushScheduled = false
        input { flush() }
    }

    private var now: Instant { EventLoop.monotonicNow() }

    private func connect() {
        let tls = ClientStream.TLS(context: settings.tls, serverName: settings.host)
        guard let proxy = settings.proxy, let deadline = machine.tunnelDeadline else {
            stream = ClientStream.connect(on: loop, host: settings.host, port: settings.port, tls: tls, delegate: self)
            return
        }
        stream = ClientStream.connect(
            on: loop, host: settings.host, port: settings.port, tls: tls, proxy: proxy, deadline: deadline,
            delegate: self)
    }

    private func openSession() {
        // Deleted in `endSession()` (when the connection closes or breaks) or in deinit.
        guard let created = HTTP2Session.make(.client, callbacks: ClientCallbacks.table, owner: self) else {
            machine.failed(.broken("nghttp2_session_client_new failed", closedByPeer: false))
            stream?.reset()
            return
        }
        session = created
        var entries = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)]
        _ = nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
    }

    private func endSession() {
        guard let session else { return }
        self.session = nil
        nghttp2_session_del(session)
    }

    /// The most streams open at once: ours, or the server's `SETTINGS_MAX_CONCURRENT_STREAMS` if lower.
    private func submitLimit(_ session: OpaquePointer) -> Int {
        min(
            settings.maxStreams,
            Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)))
    }

    /// Submits the requests that wait while the server's stream limit allows, then writes.
    private func flush() {
        guard let session, let stream else { return }
        let limit = submitLimit(session)
        while let request = machine.nextToSubmit(limit: limit) { submit(request, to: session) }
        serializeAndWrite(session: session, stream: stream)
    }

    private func submit(_ pending: PendingRequest, to session: OpaquePointer) {
        let request = pending.request
        headerBlock.setRequest(
            method: request.method, authority: settings.authority, path: request.path, headers: request.headers,
            bodyLength: request.body.count)
        let streamID = headerBlock.withFields { fields, count -> Int32 in
            // nghttp2 copies the fields; the body is read through `readRequestBody` as it is sent.
            if request.body.isEmpty { return nghttp2_submit_request(session, nil, fields, count, nil, nil) }
            var provider = nghttp2_data_provider(
                source: nghttp2_data_source(ptr: nil), read_callback: ClientCallbacks.readRequestBody)
            return nghttp2_submit_request(session, nil, fields, count, &provider, nil)
        }
        machine.submitted(pending, as: streamID)
    }

    /// Writes what nghttp2 has serialized, gathered into one write per `batchSize`.
    private func serializeAndWrite(session: OpaquePointer, stream: ClientStream) {
        depth += 1
        defer { depth -= 1 }
        while true {
            var chunk: UnsafePointer<UInt8>?
            let length = nghttp2_session_mem_send(session, &chunk)
            if length > 0 { output.append(contentsOf: UnsafeBufferPointer(start: chunk, count: length)) }
            let error = length < 0 ? HTTP2Session.words(ofError: length) : nil
            switch machine.serialized(length, gathered: output.count, batch: Self.batchSize, error: error) {
            case .gather:
                continue
            case .write(let last):
                output.withUnsafeBytes { stream.write($0) }
                output.removeAll(keepingCapacity: true)
                // The write may have failed the stream (its delegate call ended the session).
                if last || self.session == nil { return }
            case .done:
                return
            case .breakOff:
                endSession()
                stream.reset()
                return
            }
        }
    }

    /// Schedules the timer for the machine's next wake-up, unless it is due before that already (it then
    /// fires early, and the machine's answer re-arms it).
    private func armTimer() {
        guard let next = inPlace({ $0.nextWakeUp() }) else { return }
        let timer = self.timer ?? LoopTimer(on: loop) { [self] in timerFired() }
        self.timer = timer
        timer.schedule(noLaterThan: next)
    }

    // MARK: nghttp2 callbacks (inside nghttp2_session_mem_recv / mem_send, on the loop's thread)

    func readRequestBody(
        stream: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        let (count, last) = machine.nextBodyPart(
            stream: stream, into: UnsafeMutableRawBufferPointer(start: buffer, count: length))
        if last { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return count
    }

    func headerReceived(stream: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        machine.headerReceived(stream: stream, name: name, value: value)
    }

    func bodyReceived(stream: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        if machine.dataReceived(stream: stream, bytes) == .cancel, let session {
            _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, NGHTTP2_CANCEL.rawValue)
        }
    }

    func answerEnded(stream: Int32) {
        machine.answerEnded(stream: stream)
    }

    /// nghttp2 serialized the stream's HEADERS; they are written in this round (counted as written from now
    /// on: if the write then fails, the request is judged "may have been processed", the safe side).
    func requestSent(stream: Int32) {
        machine.headersWritten(stream)
    }

    func requestNotSent(stream: Int32) {
        machine.streamNotSent(stream)
    }

    func pingAnswered() {
        machine.pingAnswered(now: now)
    }

    func goawayReceived(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeBufferPointer<UInt8>) {
        machine.goawayReceived(lastStreamID: lastStreamID, errorCode: errorCode, debugData: debugData)
    }

    func streamClosed(_ stream: Int32, errorCode: UInt32) {
        machine.streamClosed(stream, errorCode: errorCode, now: now)
    }
}
