import CMicroHTTPD
import Synchronization

/// One request's state, from its request line to the end of its answer.
///
/// Ownership: MHD holds one reference through `*req_cls` (retained in the URI log callback, released in the
/// NOTIFY_COMPLETED callback, which MHD calls for every request it reported, even when the client vanishes);
/// every ``HTTPResponder`` holds another, so an answer that comes after the client left is simply dropped; while
/// suspended, ``ServerCore/suspended`` holds one more, until the request is resumed or closed or the server stops.
/// A context holds its server core unowned, so that a responder a handler keeps never keeps the server alive.
// @unchecked Sendable: the worker-only fields (`stage`, `head`, `body`, ...) are touched only from MHD callbacks
// for this connection, which MHD runs on one thread at a time; everything a responder touches is in `shared`.
final class RequestContext: @unchecked Sendable {
    enum Stage {
        case awaitingHead
        case readingBody
        case handedOver
        case finished
    }

    enum Phase {
        /// Still in the server thread's hands; responders are not handed out yet.
        case worker
        /// ``HTTPHandler/request(_:body:responder:)`` is running: an answer is kept for the server thread.
        case handling
        /// The connection is suspended until an answer comes.
        case suspended
        /// `MHD_resume_connection` was called; the server thread will send the answer (or close if none).
        case resuming
        /// The answer has been taken by the server thread.
        case answered
        /// MHD has finished with the connection; `connection` must not be used any more.
        case closed
    }

    struct Shared {
        var phase = Phase.worker
        var response: HTTPResponse?
        /// Whether this request is counted in ``ServerCore/pending``.
        var counted = false
    }

    /// Unowned: a responder the handler keeps must not keep the core, and with it the handler, alive (a cycle
    /// whenever the handler stores responders). Safe: the worker side runs only in MHD callbacks, while the daemon
    /// runs, and ``HTTPServer`` keeps the core until its daemon has stopped, which closes every request first; the
    /// responder side touches it only before this request is closed (phase `.handling` or `.suspended`).
    /// `unowned(unsafe)`, given that: a checked `unowned` reference retains and releases the core on every use,
    /// atomic operations on one object that every server thread shares, several times per request.
    unowned(unsafe) let core: ServerCore
    /// Retained: updated from the responder side, which may run after the server has gone.
    let counters: RequestCounters
    /// Valid until `shared.phase` becomes `.closed`.
    let connection: OpaquePointer
    let uriLength: Int

    // Worker-only state.
    var stage = Stage.awaitingHead
    var head: HTTPRequestHead?
    var bodyLimit = 0
    var body: [UInt8] = []
    /// An answer chosen from the head alone, sent once the (empty or small, dropped) body is in: sent any earlier,
    /// it would make MHD close the connection.
    var deferred: HTTPResponse?
    /// A head decision the handler gives later; set while the request waits suspended for it.
    var pendingDecision: PendingHeadDecision?

    let shared = Mutex(Shared())

    /// The largest declared body that is read and dropped (rather than refused by closing the connection) when the
    /// handler answers from the head alone.
    static let discardableBodyBytes = 64 * 1024

    init(core: ServerCore, connection: OpaquePointer, uriLength: Int) {
        self.core = core
        counters = core.counters
        self.connection = connection
        self.uriLength = uriLength
        counters.liveContexts.add(1, ordering: .relaxed)
    }

    deinit {
        counters.liveContexts.subtract(1, ordering: .relaxed)
    }

    // MARK: - Responder side (any thread)

    func deliver(_ response: HTTPResponse) {
        let connection = self.connection
        let counters = self.counters
        shared.withLock { state in
            guard state.response == nil else { return }
            switch state.phase {
            case .handling:
                state.response = response
            case .suspended:
                state.response = response
                state.phase = .resuming
                // Under our lock, so that `stop()` and a late answer never both resume this connection.
                MHD_resume_connection(connection)
            case .worker, .resuming, .answered, .closed:
                return
            }
            if state.counted {
                state.counted = false
                counters.pending.subtract(1, ordering: .relaxed)
            }
        }
    }

    /// Called by ``HTTPServer/stop()`` for a context it found suspended.
    func resumeForStop() {
        let connection = self.connection
        shared.withLock { state in
            if state.phase == .suspended {
                state.phase = .resuming
                MHD_resume_connection(connection)
            }
        }
    }

    /// Called from NOTIFY_COMPLETED: the connection is going away.
    func completed() {
        let counters = self.counters
        shared.withLock { state in
            state.phase = .closed
            state.response = nil
            if state.counted {
                state.counted = false
                counters.pending.subtract(1, ordering: .relaxed)
            }
        }
        if let pending = pendingDecision {
            // Closed while waiting for its head decision (the server stopped): the decision is dropped.
            pendingDecision = nil
            pending.abandon()
            core.suspended.withLock { _ = $0.contexts.removeValue(forKey: ObjectIdentifier(self)) }
        }
        if stage == .handedOver {
            // Closed while suspended, or resumed and closed before the access handler ran again (the client left):
            // `resumed()` will not run, so the registry must let go here or keep this context until `stop()`.
            stage = .finished
            core.suspended.withLock { _ = $0.contexts.removeValue(forKey: ObjectIdentifier(self)) }
        }
        body = []
        deferred = nil
        head = nil
    }

    // MARK: - Server thread side

    /// One call of the access handler for this request.
    func handle(
        url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?, uploadData: UnsafePointer<CChar>?,
        uploadSize: UnsafeMutablePointer<Int>
    ) -> MHD_Result {
        switch stage {
        case .awaitingHead:
            return start(url: url, method: method)
        case .readingBody:
            let size = uploadSize.pointee
            if size == 0 {
                return handOver()
            }
            uploadSize.pointee = 0
            guard body.count + size <= bodyLimit, let uploadData else {
                // Only a chunked body gets here: a declared length over the limit was refused in `start()`.
                stage = .finished
                body = []
                return answerMidBody(core.handler.bodyTooLarge(head!))
            }
            body.append(contentsOf: UnsafeRawBufferPointer(start: uploadData, count: size))
            return .YES
        case .handedOver:
            return resumed()
        case .finished:
            // Body bytes after an early answer are dropped; a deferred answer goes out at the end of the request.
            if uploadSize.pointee != 0 {
                uploadSize.pointee = 0
                return .YES
            }
            guard let response = deferred else { return .YES }
            deferred = nil
            return queue(response, close: false)
        }
    }

    /// The first call: the headers are in.
    private func start(url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?) -> MHD_Result {
        stage = .finished
        var decision: HeadDecision
        let head: HTTPRequestHead
        if let pending = pendingDecision, let waiting = self.head {
            // Resumed: the handler's later decision has come (or the server is stopping without one). The head
            // was read and checked before the request waited.
            head = waiting
            guard let taken = resumedWithDecision(pending) else { return .NO }
            decision = taken
        } else {
            head = makeHead(url: url, method: method)
            // The handler sees these too (the relay counts them against the client's address).
            if uriLength > core.maxURLBytes {
                return queue(core.handler.refused(head, status: 414), close: true)
            }
            if CMicroHTTPD_request_header_size(connection) > core.maxHeaderBytes {
                return queue(core.handler.refused(head, status: 431), close: true)
            }
            if Self.hasUntrustworthyFraming(head.headers) {
                return queue(core.handler.refused(head, status: 400), close: true)
            }
            decision = core.handler.head(head)
        }
        if case .later(let pending) = decision {
            switch waitForDecision(pending) {
            case .suspended:
                self.head = head
                return .YES
            case .stopping: return .NO
            case .decided(let taken): decision = taken
            }
        }
        switch decision {
        case .later:
            // `decide` never stores a `.later`: unreachable, but a request must not hang on it.
            return queue(HTTPResponse(status: 500), close: true)
        case .respond(let response):
            let length = head.contentLength ?? 0
            let chunked = head.headers["transfer-encoding"] != nil
            let waitsForContinue = head.headers["expect"].map { HTTPHeaders.namesMatch($0, "100-continue") } ?? false
            if chunked || waitsForContinue || length > Self.discardableBodyBytes {
                // Answering before the body makes MHD skip the body and close the connection.
                return queue(response, close: true)
            }
            // No body, or a small one: drop it as it arrives and answer at its end, so that the connection stays
            // open and a client still sending is not reset.
            deferred = response
            return .YES
        case .readBody(let limit):
            if let length = head.contentLength, length > limit {
                return queue(core.handler.bodyTooLarge(head), close: true)
            }
            self.head = head
            bodyLimit = max(0, limit)
            if let length = head.contentLength, length > 0 {
                body.reserveCapacity(length)
            }
            stage = .readingBody
            return .YES
        }
    }

    /// The last call: the whole body is in; hand the request to the handler and wait for its answer.
    private func handOver() -> MHD_Result {
        stage = .handedOver
        let body = self.body
        self.body = []
        counters.pending.add(1, ordering: .relaxed)
        shared.withLock { state in
            state.phase = .handling
            state.counted = true
        }
        core.handler.request(head!, body: body, responder: HTTPResponder(context: self))

        if let response = takeResponse() {
            stage = .finished
            return queue(response, close: false)
        }
        enum Outcome {
            case answer(HTTPResponse)
            case suspended
            case stopping
        }
        let connection = self.connection
        let outcome: Outcome = core.suspended.withLock { registry in
            if registry.stopping { return .stopping }
            let outcome: Outcome = shared.withLock { state in
                if let response = state.response {
                    state.response = nil
                    state.phase = .answered
                    return .answer(response)
                }
                MHD_suspend_connection(connection)
                state.phase = .suspended
                return .suspended
            }
            if case .suspended = outcome {
                registry.contexts[ObjectIdentifier(self)] = self
            }
            return outcome
        }
        switch outcome {
        case .answer(let response):
            stage = .finished
            return queue(response, close: false)
        case .suspended:
            return .YES
        case .stopping:
            stage = .finished
            return .NO
        }
    }

    /// The call after `MHD_resume_connection`: send the answer, or close if the server is stopping without one.
    private func resumed() -> MHD_Result {
        core.suspended.withLock { _ = $0.contexts.removeValue(forKey: ObjectIdentifier(self)) }
        stage = .finished
        guard let response = takeResponse() else { return .NO }
        return queue(response, close: false)
    }

    private func takeResponse() -> HTTPResponse? {
        shared.withLock { state in
            guard let response = state.response else { return nil }
            state.response = nil
            state.phase = .answered
            return response
        }
    }

    /// Hands `response` to MHD (which copies it). `close` adds `Connection: close`, as does a quiesced server.
    private func queue(_ response: HTTPResponse, close: Bool) -> MHD_Result {
        let created = response.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(
                bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let mhdResponse = created else { return .NO }
        defer { MHD_destroy_response(mhdResponse) }
        var hasConnectionHeader = false
        for field in response.headers {
            if HTTPHeaders.namesMatch(field.name, "connection") {
                hasConnectionHeader = true
            }
            _ = MHD_add_response_header(mhdResponse, field.name, field.value)
        }
        if !hasConnectionHeader && (close || core.quiesced.load(ordering: .relaxed)) {
            _ = MHD_add_response_header(mhdResponse, "Connection", "close")
        }
        return MHD_queue_response(connection, UInt32(clamping: response.status), mhdResponse)
    }

    /// Sends `response` while the request body is still arriving, then closes the connection.
    ///
    /// libmicrohttpd 0.9.75 accepts a response only before the body or after all of it, so this answer is written to
    /// the socket directly (MHD has nothing of its own in flight here: it is reading), and `MHD_NO` makes MHD close.
    private func answerMidBody(_ response: HTTPResponse) -> MHD_Result {
        let socket = CMicroHTTPD_connection_fd(connection)
        guard socket >= 0 else { return .NO }
        let reason = MHD_get_reason_phrase_for(UInt32(clamping: response.status)).map { String(cString: $0) } ?? ""
        var text = "HTTP/1.1 \(response.status) \(reason)\r\n"
        for field in response.headers {
            let unsafe =
                field.name.utf8.contains { $0 == 13 || $0 == 10 || $0 == 58 }
                || field.value.utf8.contains { $0 == 13 || $0 == 10 }
            let framing = ["content-length", "connection", "transfer-encoding"].contains {
                HTTPHeaders.namesMatch(field.name, $0)
            }
            if !unsafe && !framing {
                text += "\(field.name): \(field.value)\r\n"
            }
        }
        text += "Content-Length: \(response.body.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array(text.utf8) + response.body
        RawSocket.sendFinal(bytes, on: socket)
        return .NO
    }

    /// A `Content-Length` value as a length: digits only (MHD has refused anything else in the first field),
    /// and any value past `Int.max` (MHD reads up to 2^64 - 1) is `Int.max`, over every limit, never nil.
    static func declaredLength(_ digits: Substring) -> Int? {
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return nil
        }
        return Int(digits) ?? Int.max
    }

    /// Framing MHD accepts but the relay cannot trust (RFC 9112, 6.3): `Content-Length` fields that disagree
    /// (MHD reads the first; a proxy may have read another), a `Transfer-Encoding` other than `chunked` (MHD would
    /// wait for a body it cannot delimit), or a `Transfer-Encoding` beside a `Content-Length`. One pass over the
    /// fields, without allocating.
    static func hasUntrustworthyFraming(_ headers: HTTPHeaders) -> Bool {
        var length: Substring?
        var transferEncodings = 0
        for field in headers.fields {
            if HTTPHeaders.namesMatch(field.name, "content-length") {
                let value = field.value.trimmingSpaces
                if let first = length, first != value { return true }
                length = value
            } else if HTTPHeaders.namesMatch(field.name, "transfer-encoding") {
                transferEncodings += 1
                if transferEncodings > 1 || !HTTPHeaders.namesMatch(String(field.value.trimmingSpaces), "chunked") {
                    return true
                }
            }
        }
        return transferEncodings > 0 && length != nil
    }

    private func makeHead(url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?) -> HTTPRequestHead {
        var fields: [(name: String, value: String)] = []
        fields.reserveCapacity(8)
        _ = withUnsafeMutablePointer(to: &fields) { pointer in
            MHD_get_connection_values_n(connection, .HEADER_KIND, collectHeader, pointer)
        }
        let headers = HTTPHeaders(fields)
        var contentLength: Int?
        if let declared = headers["content-length"] {
            contentLength = Self.declaredLength(declared.trimmingSpaces)
        }
        let peer =
            CMicroHTTPD_client_address(connection).flatMap { SocketPeer(socketAddress: $0) }
            ?? SocketPeer(bytes: [0, 0, 0, 0])!
        let path = url.map { String(cString: $0) } ?? ""
        return HTTPRequestHead(
            method: method.map { String(cString: $0) } ?? "", path: path, headers: headers, peer: peer,
            contentLength: contentLength, route: core.handler.route(path: path))
    }
}

/// MHD header iterator: appends each field to the array `cls` points to.
private func collectHeader(
    _ cls: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind, _ key: UnsafePointer<CChar>?, _ keySize: Int,
    _ value: UnsafePointer<CChar>?, _ valueSize: Int
) -> MHD_Result {
    guard let cls, let key else { return .YES }
    let fields = cls.assumingMemoryBound(to: [(name: String, value: String)].self)
    let name = String(decoding: UnsafeRawBufferPointer(start: key, count: keySize), as: UTF8.self)
    let text =
        value.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: valueSize), as: UTF8.self) } ?? ""
    fields.pointee.append((name: name, value: text))
    return .YES
}

extension String {
    fileprivate var trimmingSpaces: Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = lastIndex(where: { !isSpace($0) })!
        return self[first...last]
    }
}
