import CNGHTTP2
import COpenSSL
import CSystem
import Foundation
import HTTP2Wire
import OpenSSLSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One HTTP/2 connection to the origin: one TCP socket, its OpenSSL object and an nghttp2 client
/// session, driven by a thread of its own. The I/O layer around a ``ConnectionStateMachine``,
/// which decides what every event means; this type only does what it says.
///
/// The thread takes requests from its inbox in ``ClientCore``, submits them to nghttp2, writes
/// what nghttp2 serialized with one `SSL_write` per round, reads answers, reports what ended,
/// and sleeps in `poll` until the socket is ready, a deadline or PING is due, or `wake()` is called.
final class HTTP2ClientConnection: @unchecked Sendable {
    // Safe to share: `id`, `core`, `settings`, `notBefore` and `wakeDescriptor` are immutable;
    // every other property is touched by the connection's own thread only; other threads call
    // `wake()` alone, through a reference taken while the core held this connection registered.

    let id: Int
    private let core: ClientCore
    private let settings: ClientSettings
    /// Pacing: the thread does not connect before this.
    private let notBefore: ContinuousClock.Instant?
    /// An eventfd: `wake()` writes to it, the thread polls it. Closed in deinit.
    private let wakeDescriptor: Int32
    private let finished = DispatchSemaphore(value: 0)
    private let threadID = Mutex<pthread_t?>(nil)

    private var machine: ConnectionStateMachine

    /// How far the connect has come (I/O detail of the machine's `connecting` state).
    private enum ConnectStep {
        case resolving(Resolution?)
        case connecting
        case handshaking
        case done
    }

    private var connectStep = ConnectStep.resolving(nil)
    private var addresses: [SocketAddress] = []
    private var nextAddress = 0
    private var lastConnectError = ""
    private var socket: Int32 = -1
    private var ssl: OpaquePointer?
    private var session: OpaquePointer?
    private var pollDescriptors = [pollfd](repeating: pollfd(), count: 2)
    /// What the last `poll` reported for the socket.
    private var socketEvents: Int16 = 0
    /// The socket must become writable before anything more can be written (or connected).
    private var wantWritable = false

    /// Requests taken from the inbox and not yet submitted (the server's stream limit is reached).
    private var waiting: [PendingRequest] = []
    private var waitingHead = 0
    /// Submitted requests by stream id, until their stream closes.
    private var streams: [Int32: RequestStream] = [:]
    /// Streams whose HEADERS nghttp2 has serialized, with the writer position just past them, oldest
    /// first: each is written once the writer has handed that many bytes to the socket.
    private var headersInFlight: [(stream: Int32, end: Int)] = []

    private var writer = FrameWriter()
    /// The writer's counters, read from nghttp2 callbacks that run inside `writer.flush`.
    private let written: FrameWriter.Counters
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)
    private var headerBytes: [UInt8] = []
    private var headerSpans: [(name: Int, nameLength: Int, value: Int, valueLength: Int)] = []
    private var headerFields: [nghttp2_nv] = []

    private var report = PoolStateMachine.Report()
    private var established = false
    private var proven = false
    private var sawGoaway = false
    /// Events for `settings.onEvent`, told after each round.
    private var events: [HTTP2ClientEvent] = []

    init(id: Int, core: ClientCore, settings: ClientSettings, notBefore: ContinuousClock.Instant? = nil) {
        self.id = id
        self.core = core
        self.settings = settings
        self.notBefore = notBefore
        machine = ConnectionStateMachine(connectDeadline: .now, timing: settings.timing)
        wakeDescriptor = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        written = writer.counters
    }

    deinit {
        if let session { nghttp2_session_del(session) }  // the rule in `HTTP2Session`; normally gone already
        if wakeDescriptor >= 0 { _ = Glibc.close(wakeDescriptor) }
        readBuffer.deallocate()
    }

    /// Starts the connection's thread.
    func start() {
        // The thread holds the connection while `run` runs, and signals `finished` only after letting go of it: once
        // `join()` returns, nothing of this thread holds it (released there later, it was still alive when an
        // exiting relay's LeakSanitizer looked, which reported its weak-reference side table as leaked).
        let retained = Unmanaged.passRetained(self)
        let finished = self.finished
        let thread = Thread {
            retained.takeRetainedValue().run()
            finished.signal()
        }
        thread.name = "HTTP2Client connection \(id)"
        thread.start()
    }

    /// Waits until the connection's thread has ended (at once when called on that thread,
    /// from a completion, which ends the thread when it returns).
    func join() {
        let current = pthread_self()
        if threadID.withLock({ $0.map { pthread_equal($0, current) != 0 } ?? false }) { return }
        finished.wait()
    }

    /// Interrupts the thread's `poll`. May be called from any thread, also after the thread left.
    func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeDescriptor, &one, 8)
    }

    // MARK: The thread

    private func run() {
        threadID.withLock { $0 = pthread_self() }
        // What `top -H` and /proc show (Foundation's `Thread.name` does not reach the kernel here).
        _ = csystem_set_thread_name("apns-conn-\(id % 1000)")
        defer {
            closeSocket()
            // OpenSSL gave this thread state of its own (random generators, error queue), which it
            // frees in a thread-exit destructor, after `join()` has returned: freed here instead.
            OPENSSL_thread_stop()
        }
        if let notBefore { pace(until: notBefore) }
        machine = ConnectionStateMachine(connectDeadline: .now + settings.connectTimeout, timing: settings.timing)
        if wakeDescriptor < 0 {
            fail(connecting: .connectFailed, .cannotConnect, "eventfd failed: \(errno.errnoDescription)")
        } else {
            let resolution = settings.resolver.resolution()
            connectStep = .resolving(resolution)
            resolution.notify { [weak self] in self?.wake() }
        }
        var reportedRetire = false
        while true {
            let retired = isRetired
            report.established = established
            report.proven = proven
            report.retire = retired
            report.goaway = sawGoaway
            reportedRetire = retired
            let step = core.exchange(connection: self, report: report, now: .now)
            report = PoolStateMachine.Report()
            tellEvents()
            for delivery in step.deliveries { delivery.complete() }
            if step.exit {
                closeGracefully()
                break
            }
            if step.shutDown {
                shutDown(inbox: step.inbox)
                break
            }
            for request in step.inbox { accept(request) }
            advance()
            let now = ContinuousClock.now
            expireOverdue(now: now)
            if !report.results.isEmpty || reportedRetire != isRetired || !events.isEmpty { continue }
            var until = now + .seconds(1)
            if let next = machine.nextWakeUp() { until = min(until, next) }
            if let deadline = earliestWaitingDeadline { until = min(until, deadline) }
            if let deadline = step.queueDeadline { until = min(until, deadline) }
            wait(until: until, now: now)
        }
    }

    /// The connection takes no new requests (GOAWAY, refused, silent, failed, retired).
    private var isRetired: Bool { !machine.takesStreams && !machine.isConnecting }

    /// Waits before connecting (reconnects after GOAWAY are paced); wake-ups are for shutdown.
    private func pace(until instant: ContinuousClock.Instant) {
        while ContinuousClock.now < instant && !core.isShutDown {
            wait(until: instant, now: .now)
        }
    }

    private func tellEvents() {
        guard !events.isEmpty else { return }
        let told = events
        events = []
        if let onEvent = settings.onEvent { for event in told { onEvent(event) } }
    }

    private func wait(until: ContinuousClock.Instant, now: ContinuousClock.Instant) {
        let remaining = now.duration(to: until)
        let milliseconds =
            remaining <= .zero
            ? 0
            : Int32(
                clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000
                    + 1)
        // Two fixed slots (the wake-up eventfd, the socket), kept between calls: no allocation per wait.
        pollDescriptors[0] = pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0)
        var count: nfds_t = 1
        if socket >= 0 && !machine.isClosed {
            var events = Int16(POLLIN)
            if wantWritable { events |= Int16(POLLOUT) }
            if case .connecting = connectStep { events = Int16(POLLOUT) }
            pollDescriptors[1] = pollfd(fd: socket, events: events, revents: 0)
            count = 2
        }
        let ready = poll(&pollDescriptors, count, milliseconds)
        guard ready > 0 else { return }
        if pollDescriptors[0].revents != 0 {
            var value: UInt64 = 0
            _ = Glibc.read(wakeDescriptor, &value, 8)
        }
        if count > 1 { socketEvents = pollDescriptors[1].revents }
    }

    private func accept(_ request: PendingRequest) {
        if machine.isClosed || isRetired {
            end(request, machine.unsentOutcome)
            return
        }
        waiting.append(request)
        waitingDeadlineBound = min(waitingDeadlineBound ?? request.deadline, request.deadline)
    }

    /// No waiting request's deadline is before this (it may be stale, never late).
    private var waitingDeadlineBound: ContinuousClock.Instant?

    private var earliestWaitingDeadline: ContinuousClock.Instant? {
        waitingHead < waiting.count ? waitingDeadlineBound : nil
    }

    /// Moves the connection on as far as it can go without waiting.
    private func advance() {
        if case .resolving(let resolution) = connectStep, let answer = resolution?.answer {
            addresses = answer.addresses
            if let problem = answer.problem {
                let detail =
                    problem.hasPrefix(SocketAddress.resolveFailurePrefix)
                    ? String(problem.dropFirst(SocketAddress.resolveFailurePrefix.count)) : problem
                fail(connecting: .connectFailed, .cannotResolve, problem, detail: detail)
            } else {
                connectStep = .connecting
            }
        }
        if case .connecting = connectStep { continueConnect() }
        if case .handshaking = connectStep { continueHandshake() }
        if session != nil && !machine.isClosed {
            if socketEvents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { readAvailable() }
            if machine.takesStreams { submitWaiting() }
            flush()
        }
        socketEvents = 0
        if machine.isClosed || isRetired { failWaiting() }
    }

    // MARK: Connecting

    private func continueConnect() {
        while true {
            if socket >= 0 {
                // A connect in progress: done when the socket is writable (or has failed).
                guard socketEvents & Int16(POLLOUT | POLLERR | POLLHUP) != 0 else { return }
                socketEvents = 0
                var error: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                _ = getsockopt(socket, SOL_SOCKET, SO_ERROR, &error, &length)
                if error == 0 { break }
                lastConnectError = error.errnoDescription
                closeSocket()
            }
            guard nextAddress < addresses.count else {
                fail(
                    connecting: .connectFailed, .cannotConnect, "cannot connect: \(lastConnectError)",
                    detail: lastConnectError)
                return
            }
            let address = addresses[nextAddress]
            nextAddress += 1
            switch address.startConnect() {
            case .failed(let error):
                lastConnectError = error.errnoDescription
            case .started(let descriptor, let inProgress):
                socket = descriptor
                if inProgress {
                    wantWritable = true
                    return
                }
            }
            if socket >= 0 { break }
        }
        wantWritable = false
        setSocketOptions()
        // The peer must prove the configured name (or address): without that check any certificate
        // the roots trust would do, so a failure to set it up fails the connection.
        guard let ssl = settings.tls.session(socket: socket, host: settings.host, hostIsAddress: settings.hostIsAddress)
        else {
            fail(connecting: .tls, .tlsFailed, "cannot set up the TLS connection's name check")
            return
        }
        self.ssl = ssl
        connectStep = .handshaking
    }

    private func setSocketOptions() {
        func set(_ level: Int32, _ option: Int32, _ value: Int32) {
            var value = value
            _ = setsockopt(socket, level, option, &value, socklen_t(MemoryLayout<Int32>.size))
        }
        set(Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        // Idle connections are kept and checked with PING; TCP keep-alive backs it up.
        set(SOL_SOCKET, SO_KEEPALIVE, 1)
        set(Int32(IPPROTO_TCP), TCP_KEEPIDLE, 30)
        set(Int32(IPPROTO_TCP), TCP_KEEPINTVL, 15)
    }

    private func continueHandshake() {
        guard let ssl else { return }
        switch TLSHandshake.step(ssl) {
        case .done:
            break
        case .wantsReadable:
            wantWritable = false
            return
        case .wantsWritable:
            wantWritable = true
            return
        case .certificateRejected(let text):
            fail(
                connecting: .tls, .tlsVerificationFailed, "the server's certificate was not accepted: \(text)",
                detail: text)
            return
        case .failed(let error):
            fail(connecting: .tls, .tlsFailed, "the TLS handshake failed: \(error)", detail: error)
            return
        }
        guard ALPN.agreed(on: ALPN.http2, ssl) else {
            fail(connecting: .tls, .alpnRefused, "the server did not agree to HTTP/2 (ALPN h2)", detail: "")
            return
        }
        // Deleted in `closeSocket()`, which `run()` calls before the thread (and this object) goes.
        guard let created = HTTP2Session.make(.client, callbacks: ClientCallbacks.table, owner: self) else {
            fail(connecting: .protocolError, .tlsFailed, "nghttp2_session_client_new failed")
            return
        }
        session = created
        var entries = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)
        ]
        _ = nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        connectStep = .done
        machine.connected(now: .now)
        established = true
        events.append(HTTP2ClientEvent(.connected))
        wantWritable = false
        socketEvents = Int16(POLLIN)  // TLS may hold bytes that came with the handshake
    }

    /// The connection could not be made: every request here fails, not processed.
    /// `detail` is the system's or OpenSSL's own words, for the event (the reason without its preamble).
    private func fail(
        connecting code: HTTP2ClientError.Code, _ kind: HTTP2ClientEvent.Kind, _ reason: String, detail: String? = nil
    ) {
        machine.connectFailed(HTTP2ClientError(code, reason, mayHaveBeenProcessed: false))
        connectStep = .done
        events.append(HTTP2ClientEvent(kind, detail ?? reason))
        closeSocket()
        failWaiting()
    }

    // MARK: Requests

    private func submitWaiting() {
        guard let session, waitingHead < waiting.count else { return }
        let serverLimit = Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
        let limit = min(settings.maxStreams, serverLimit)
        while waitingHead < waiting.count && streams.count < limit {
            let request = waiting[waitingHead]
            waitingHead += 1
            submit(request, to: session)
        }
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        }
    }

    private func submit(_ pending: PendingRequest, to session: OpaquePointer) {
        let request = pending.request
        headerBytes.removeAll(keepingCapacity: true)
        headerSpans.removeAll(keepingCapacity: true)
        func add(_ name: StaticString, _ value: String) {
            let nameStart = headerBytes.count
            headerBytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            let valueStart = headerBytes.count
            value.withUTF8Bytes { headerBytes.append(contentsOf: $0) }
            headerSpans.append((nameStart, valueStart - nameStart, valueStart, headerBytes.count - valueStart))
        }
        add(":method", request.method)
        add(":scheme", "https")
        add(":authority", settings.authority)
        add(":path", request.path)
        var hasLength = false
        for (name, value) in request.headers {
            let nameStart = headerBytes.count
            name.withUTF8Bytes { bytes in
                for byte in bytes { headerBytes.append(byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) }
            }
            let valueStart = headerBytes.count
            if valueStart - nameStart == 14 && headerBytes[nameStart...].starts(with: "content-length".utf8) {
                hasLength = true
            }
            value.withUTF8Bytes { headerBytes.append(contentsOf: $0) }
            headerSpans.append((nameStart, valueStart - nameStart, valueStart, headerBytes.count - valueStart))
        }
        if !request.body.isEmpty && !hasLength { add("content-length", String(request.body.count)) }
        let streamID = headerBytes.withUnsafeMutableBufferPointer { bytes -> Int32 in
            let base = bytes.baseAddress!
            headerFields.removeAll(keepingCapacity: true)
            for span in headerSpans {
                headerFields.append(
                    nghttp2_nv(
                        name: base + span.name, value: base + span.value, namelen: span.nameLength,
                        valuelen: span.valueLength, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
            }
            // nghttp2 copies the fields; the body is read through `readRequestBody` as it is sent.
            if request.body.isEmpty {
                return nghttp2_submit_request(session, nil, headerFields, headerFields.count, nil, nil)
            }
            var provider = nghttp2_data_provider(
                source: nghttp2_data_source(ptr: nil), read_callback: ClientCallbacks.readRequestBody)
            return nghttp2_submit_request(session, nil, headerFields, headerFields.count, &provider, nil)
        }
        guard streamID > 0 else {
            let reason = String(cString: nghttp2_strerror(streamID))
            _ = reason
            end(pending, .notSent)
            return
        }
        streams[streamID] = RequestStream(pending: pending, id: streamID)
        machine.streamSubmitted(streamID, deadline: pending.deadline)
    }

    private func end(_ request: PendingRequest, _ outcome: StreamOutcome, response: HTTP2Response? = nil) {
        report.results.append(PoolStateMachine.Ended(request: request, outcome: outcome, response: response))
    }

    /// Fails the requests not yet submitted: the server never saw them.
    private func failWaiting() {
        guard waitingHead < waiting.count else { return }
        let outcome = machine.unsentOutcome
        for request in waiting[waitingHead...] { end(request, outcome) }
        waiting.removeAll(keepingCapacity: true)
        waitingHead = 0
    }

    /// Acts on what the state machine said.
    private func perform(_ actions: [ConnectionStateMachine.Action]) {
        for action in actions {
            switch action {
            case .sendPing:
                if let session { _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil) }
            case .cancel(let id, let outcome):
                guard let stream = streams.removeValue(forKey: id) else { continue }
                if let session, !machine.isClosed {
                    _ = nghttp2_submit_rst_stream(
                        session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_CANCEL.rawValue)
                }
                end(stream.pending, outcome)
            case .retire(let cause):
                if case .pingUnanswered = cause { events.append(HTTP2ClientEvent(.pingUnanswered)) }
            case .close:
                closeSocket()
            }
        }
    }

    /// Ends the requests whose deadline has passed (`.timeout`), sends PING when idle, retires a
    /// connection whose PING went unanswered: the state machine decides, this does.
    private func expireOverdue(now: ContinuousClock.Instant) {
        let wasConnecting = machine.isConnecting
        let actions = machine.tick(now: now)
        if wasConnecting && machine.isClosed {
            let resolving: Bool
            if case .resolving = connectStep { resolving = true } else { resolving = false }
            let reason = resolving ? "resolving the host timed out" : "connect timed out"
            machine.connectFailed(HTTP2ClientError(.connectFailed, reason, mayHaveBeenProcessed: false))
            events.append(HTTP2ClientEvent(resolving ? .cannotResolve : .cannotConnect, reason))
            connectStep = .done
        }
        perform(actions)
        if waitingHead < waiting.count, let earliest = earliestWaitingDeadline, earliest <= now {
            var kept: [PendingRequest] = []
            var expired = false
            for request in waiting[waitingHead...] {
                if request.deadline <= now {
                    expired = true
                    end(request, .timedOut(written: false))
                } else {
                    kept.append(request)
                }
            }
            waiting = kept
            waitingHead = 0
            waitingDeadlineBound = kept.lazy.map(\.deadline).min()
            // Still not connected by a request's deadline: presumed unreachable.
            if expired && machine.isConnecting {
                perform(machine.retire(.deadline))
            }
        }
        if machine.isClosed { failWaiting() }
        flush()
    }

    // MARK: Reading and writing

    private func readAvailable() {
        guard let ssl, let session else { return }
        let buffer = readBuffer.baseAddress!
        while !machine.isClosed {
            ERR_clear_error()
            let count = SSL_read(ssl, buffer, Int32(readBuffer.count))
            if count > 0 {
                machine.received(now: .now)
                let consumed = nghttp2_session_mem_recv(session, buffer.assumingMemoryBound(to: UInt8.self), Int(count))
                if consumed < 0 {
                    flush()  // nghttp2 queued a GOAWAY telling the server why
                    lose("the server broke the HTTP/2 protocol (\(String(cString: nghttp2_strerror(Int32(consumed)))))")
                    return
                }
                continue
            }
            switch SSL_get_error(ssl, count) {
            case SSL_ERROR_WANT_READ:
                return
            case SSL_ERROR_WANT_WRITE:
                wantWritable = true
                return
            default:
                lose("the connection closed before the answer")
                return
            }
        }
    }

    /// Writes what nghttp2 has serialized, a round at a time (see `FrameWriter`), and tells the
    /// machine which requests' HEADERS reached the socket.
    private func flush() {
        guard let ssl, let session, !machine.isClosed else { return }
        let progress = writer.flush(session: session, ssl: ssl)
        noteWrittenHeaders()
        switch progress {
        case .done: wantWritable = false
        case .wantsWritable: wantWritable = true
        case .wantsReadable: break
        case .failed(let reason):
            // The server may have said GOAWAY before it closed: what it sent is still readable, and
            // says which streams it never processed.
            readAvailable()
            if !machine.isClosed { lose(reason) }
        }
    }

    private func noteWrittenHeaders() {
        var done = 0
        while done < headersInFlight.count && headersInFlight[done].end <= written.written {
            machine.headersWritten(headersInFlight[done].stream)
            done += 1
        }
        if done > 0 { headersInFlight.removeFirst(done) }
    }

    /// The connection broke: every open stream fails (processed if it was written, unless GOAWAY
    /// said otherwise), and so does every request not yet sent.
    private func lose(_ reason: String) {
        noteWrittenHeaders()
        for lost in machine.connectionLost(reason) {
            guard let stream = streams.removeValue(forKey: lost.stream) else { continue }
            end(stream.pending, lost.outcome)
        }
        for stream in streams.values.sorted(by: { $0.id < $1.id }) { end(stream.pending, .notSent) }
        streams = [:]
        closeSocket()
        failWaiting()
    }

    /// Ends the session politely (GOAWAY, TLS close_notify), without waiting for the server.
    private func closeGracefully() {
        if !machine.isClosed, let session, let ssl {
            _ = nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
            _ = writer.flush(session: session, ssl: ssl)
            ERR_clear_error()
            _ = SSL_shutdown(ssl)
        }
        closeSocket()
    }

    /// Frees the session, the TLS object and the socket. A connect that failed closes its socket
    /// and goes on to the next address.
    private func closeSocket() {
        if let session {
            nghttp2_session_del(session)
            self.session = nil
        }
        if let ssl {
            ERR_clear_error()
            SSL_free(ssl)  // the socket BIO does not close the descriptor
            self.ssl = nil
        }
        if socket >= 0 {
            _ = Glibc.close(socket)
            socket = -1
        }
        wantWritable = false
    }

    /// Fails everything with `.shutdown` and leaves.
    private func shutDown(inbox: [PendingRequest]) {
        noteWrittenHeaders()
        var ended: [PoolStateMachine.Delivery] = []
        let notSent = Result<HTTP2Response, HTTP2ClientError>.failure(StreamOutcome.shutdown(written: false).error!)
        for request in inbox { ended.append(PoolStateMachine.Delivery(request: request, result: notSent)) }
        if waitingHead < waiting.count {
            for request in waiting[waitingHead...] {
                ended.append(PoolStateMachine.Delivery(request: request, result: notSent))
            }
        }
        waiting = []
        waitingHead = 0
        let writtenStreams = Set(machine.writtenStreams)
        for stream in streams.values.sorted(by: { $0.id < $1.id }) {
            let error = StreamOutcome.shutdown(written: writtenStreams.contains(stream.id)).error!
            ended.append(PoolStateMachine.Delivery(request: stream.pending, result: .failure(error)))
        }
        streams = [:]
        closeGracefully()
        core.departed(connection: self, completed: ended.count)
        for delivery in ended { delivery.complete() }
    }

    // MARK: nghttp2 callbacks (own thread, inside nghttp2_session_mem_recv / mem_send)

    func readRequestBody(
        stream: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        streams[stream]?.outgoing.copyNext(into: buffer, length: length, flags: flags)
            ?? OutgoingBody.nothingMore(flags: flags)
    }

    func headerReceived(stream: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let open = streams[stream] else { return }
        if name.first == UInt8(ascii: ":") {
            guard name.elementsEqual(":status".utf8) else { return }
            var status = 0
            for byte in value where byte >= 0x30 && byte <= 0x39 && status < 1000 {
                status = status * 10 + Int(byte - 0x30)
            }
            if status >= 200 {
                open.status = status
                open.headers = []
            } else {
                open.status = nil  // informational: its fields are not the answer's
            }
            return
        }
        // Fields of an informational answer are skipped; past `maxResponseHeaderFields`, the rest.
        guard open.status != nil, open.headers.count < ClientSettings.maxResponseHeaderFields else { return }
        open.headers.append(
            (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
    }

    func bodyReceived(stream: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        guard let open = streams[stream], !open.tooLarge else { return }
        guard open.body.count + bytes.count <= ClientSettings.maxResponseBodyBytes else {
            open.tooLarge = true
            if let session {
                _ = nghttp2_submit_rst_stream(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, NGHTTP2_CANCEL.rawValue)
            }
            return
        }
        open.body.append(contentsOf: bytes)
    }

    func answerEnded(stream: Int32) {
        streams[stream]?.ended = true
    }

    /// nghttp2 serialized the stream's HEADERS: they are written once the writer passes this point.
    func requestSent(stream: Int32) {
        headersInFlight.append((stream, written.queued))
    }

    func requestNotSent(stream: Int32) {
        guard let open = streams.removeValue(forKey: stream) else { return }
        end(open.pending, machine.streamNotSent(stream))
    }

    func pingAnswered() {
        machine.pingAnswered(now: .now)
    }

    func goawayReceived(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeBufferPointer<UInt8>) {
        let reason = Self.goawayReason(debugData)
        let actions = machine.goawayReceived(lastStreamID: lastStreamID, errorCode: errorCode, reason: reason)
        if !actions.isEmpty {
            sawGoaway = true
            events.append(HTTP2ClientEvent(.goaway, reason ?? StreamOutcome.name(ofErrorCode: errorCode)))
        }
        perform(actions)
    }

    /// The `reason` of GOAWAY debug data such as APNs' `{"reason":"Shutdown"}`, if it is a plain
    /// word (anything else is not repeated: it could carry anything).
    static func goawayReason(_ data: UnsafeBufferPointer<UInt8>) -> String? {
        guard !data.isEmpty, data.count <= 1024,
            let object = try? JSONSerialization.jsonObject(with: Data(data)) as? [String: Any],
            let reason = object["reason"] as? String, (1...64).contains(reason.utf8.count),
            reason.utf8.allSatisfy({ $0 < 0x80 && (isalnum(Int32($0)) != 0) })
        else { return nil }
        return reason
    }

    func streamClosed(_ stream: Int32, errorCode: UInt32) {
        guard let open = streams.removeValue(forKey: stream) else { return }
        if open.tooLarge {
            _ = machine.streamClosed(stream, status: nil, resetCode: errorCode, now: .now)
            end(open.pending, .tooLarge)
            return
        }
        let status = open.ended ? open.status : nil
        let (outcome, actions) = machine.streamClosed(stream, status: status, resetCode: errorCode, now: .now)
        perform(actions)
        if case .answered(let status) = outcome {
            if !proven && settings.provesConnection(status) {
                proven = true
                events.append(HTTP2ClientEvent(.proven))
            }
            end(open.pending, outcome, response: HTTP2Response(status: status, headers: open.headers, body: open.body))
        } else {
            end(open.pending, outcome)
        }
    }
}
