import CCurl
import COpenSSL
import Foundation
import Synchronization

/// One HTTP/2 connection to the origin: a curl multi handle that may hold one TCP connection
/// (CURLMOPT_MAX_HOST_CONNECTIONS = 1, and `transferOpenSocketCallback` refuses a second
/// socket once a request has been sent), driven by a thread of its own.
///
/// The thread takes requests from its inbox in ``ClientCore``, runs them in curl, reports what
/// ended, and sleeps in `curl_multi_poll` until curl has work or `wake()` is called.
///
/// curl 7.88.1 resends a request by itself on a new connection when the stream was refused
/// (which is safe) and also when a reused connection died before any byte of the answer came
/// (which is not: the server may have processed it). It logs both ("REFUSED_STREAM, retrying a
/// fresh connect" then "Connection died, retrying a fresh connect"); the connection notes those
/// lines, takes such a transfer out of curl, and lets ``DispatchState`` decide whether to retry it.
final class Connection: @unchecked Sendable {
    // Safe to share: `id`, `core`, `settings` and `multi` are immutable; every other property
    // is touched by the connection's own thread only; other threads call `wake()` alone, through
    // a reference taken while the core held this connection registered (so `multi` is alive).

    let id: Int
    private let core: ClientCore
    private let settings: TransferSettings
    private let multi: UnsafeMutableRawPointer?
    private let finished = DispatchSemaphore(value: 0)

    private var transfers: [UnsafeMutableRawPointer: Transfer] = [:]
    /// Finished transfers whose easy handles wait for the next requests (at most `maxIdleTransfers`).
    private var idleTransfers: [Transfer] = []
    private var retrying: [Transfer] = []
    private var report = DispatchState.Report()
    private var earliestDeadline: ContinuousClock.Instant?
    /// The TLS connection has been up (set by the pre-request callback).
    var established = false
    /// The TCP socket curl opened (see `socketOpened`) and its inode, which tells whether the
    /// descriptor still is that socket: curl may have closed it and the number been reused.
    private var socket: (descriptor: Int32, inode: UInt)?
    private var retire = false
    /// The last stream id of the GOAWAY received, if any: streams above it were not processed.
    private var goawayLastStreamID: Int?
    private var reportedRetire = false
    private let threadID = Mutex<pthread_t?>(nil)

    /// Our own deadline check only catches transfers curl does not time out itself (those
    /// waiting for a stream); curl's CURLOPT_TIMEOUT_MS, which knows the phase, comes first.
    private static let deadlineGrace = Duration.milliseconds(50)
    /// Easy handles kept for reuse: setting one up per request cost about 8% of the relay's work per
    /// push, while each one kept holds curl's buffers (16 KiB to receive, 16 KiB to upload).
    static let maxIdleTransfers = 64

    init(id: Int, core: ClientCore, settings: TransferSettings) {
        self.id = id
        self.core = core
        self.settings = settings
        multi = curl_multi_init()
        if let multi {
            _ = CCurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX)
            _ = CCurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 1)
            _ = CCurl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 1)
            _ = CCurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, 1)
            _ = CCurl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, min(settings.maxStreams, 1 << 30))
        }
    }

    deinit {
        // The kept easy handles are no longer in the multi handle; free them before it all the same.
        idleTransfers = []
        if let multi { curl_multi_cleanup(multi) }
    }

    /// Starts the connection's thread.
    func start() {
        let thread = Thread { [self] in run() }
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

    /// Interrupts `curl_multi_poll`. Callers hold a reference taken while the connection was
    /// registered in the core, so `multi` is alive (it is freed in deinit); curl_multi_wakeup may be
    /// called from any thread, also after the connection's thread has left.
    func wake() {
        if let multi { _ = curl_multi_wakeup(multi) }
    }

    // MARK: Callbacks from transfers (own thread, inside curl_multi_perform)

    func goawayReceived(lastStreamID: Int?) {
        retire = true
        goawayLastStreamID = min(goawayLastStreamID ?? Int.max, lastStreamID ?? 0)
    }

    /// Notes the connection's one TCP socket (curl owns and closes it; it is only corked here).
    func socketOpened(_ descriptor: Int32) {
        var status = stat()
        guard descriptor >= 0, fstat(descriptor, &status) == 0 else { return }
        socket = (descriptor, status.st_ino)
    }

    func reconnectBlocked() { retire = true }

    func transferWantsRetry(_ transfer: Transfer) {
        retire = true
        retrying.append(transfer)
    }

    // MARK: The thread

    private func run() {
        threadID.withLock { $0 = pthread_self() }
        defer {
            // curl's TLS gave this thread OpenSSL state of its own (random generators, error queue), which OpenSSL
            // frees in a thread-exit destructor, after `join()` has returned: a process exiting right after
            // `shutdown()` caught it half-freed (LeakSanitizer reported the generators). Freed here instead.
            OPENSSL_thread_stop()
            finished.signal()
        }
        while true {
            report.established = established
            report.retire = retire
            reportedRetire = retire
            let step = core.exchange(connection: self, report: report, now: .now)
            report = DispatchState.Report()
            for (request, result) in step.deliveries { request.completion(result) }
            if step.exit { break }
            if step.shutDown {
                shutDown(inbox: step.inbox)
                break
            }
            guard let multi else {
                for request in step.inbox {
                    end(
                        request,
                        .failure(
                            HTTP2ClientError(.protocolError, "curl_multi_init failed", mayHaveBeenProcessed: false)))
                }
                retire = true
                continue
            }
            for request in step.inbox { add(request, to: multi) }
            var running: Int32 = 0
            // curl writes each request's frames with separate TLS records and send calls; corking the
            // socket for the duration of one round lets the kernel send them as a few full segments
            // when it is uncorked, instead of a packet per frame.
            let corked = cork()
            _ = curl_multi_perform(multi, &running)
            if let corked { uncork(corked) }
            harvest(multi)
            let now = ContinuousClock.now
            expireOverdue(multi, now: now)
            if !report.results.isEmpty || reportedRetire != retire { continue }
            var wait = Duration.seconds(1)
            if let deadline = earliestDeadline { wait = min(wait, now.duration(to: deadline + Self.deadlineGrace)) }
            if let deadline = step.queueDeadline { wait = min(wait, now.duration(to: deadline)) }
            let milliseconds = Int32(clamping: max(Transfer.milliseconds(wait) + 1, 0))
            _ = curl_multi_poll(multi, nil, 0, milliseconds, nil)
        }
    }

    /// Corks the socket if it is still curl's; returns the descriptor to uncork. Only this thread
    /// runs curl, so the socket cannot be closed between the check and the cork.
    private func cork() -> Int32? {
        guard let socket else { return nil }
        var status = stat()
        guard fstat(socket.descriptor, &status) == 0, status.st_ino == socket.inode else {
            self.socket = nil
            return nil
        }
        var on: Int32 = 1
        _ = setsockopt(socket.descriptor, Int32(IPPROTO_TCP), TCP_CORK, &on, socklen_t(MemoryLayout<Int32>.size))
        return socket.descriptor
    }

    /// Sends what the round wrote. Harmless if curl closed the socket during the round (the
    /// call fails, or at worst uncorks another socket, which nothing here corks).
    private func uncork(_ descriptor: Int32) {
        var off: Int32 = 0
        _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_CORK, &off, socklen_t(MemoryLayout<Int32>.size))
    }

    private func add(_ request: PendingRequest, to multi: UnsafeMutableRawPointer) {
        guard request.deadline > .now else {
            end(request, .failure(HTTP2ClientError(.timeout, "no connection in time", mayHaveBeenProcessed: false)))
            return
        }
        let transfer: Transfer
        do {
            if let reused = idleTransfers.popLast() {
                try reused.start(request, now: .now)
                transfer = reused
            } else {
                transfer = try Transfer(request: request, connection: self, settings: settings)
            }
        } catch {
            end(request, .failure(error))
            return
        }
        guard curl_multi_add_handle(multi, transfer.easy) == CURLM_OK else {
            // The handle may be in a state curl refuses: do not reuse it.
            end(
                request,
                .failure(HTTP2ClientError(.protocolError, "curl_multi_add_handle failed", mayHaveBeenProcessed: false)))
            return
        }
        transfers[transfer.easy] = transfer
        earliestDeadline = min(earliestDeadline ?? request.deadline, request.deadline)
    }

    private func end(_ request: PendingRequest, _ result: Result<HTTP2Response, HTTP2ClientError>) {
        report.results.append((request, result))
    }

    /// Collects the transfers curl finished, and those it wanted to resend.
    private func harvest(_ multi: UnsafeMutableRawPointer) {
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            finish(easy, code: code, multi: multi)
        }
        let wantRetry = retrying
        retrying = []
        for transfer in wantRetry where transfers[transfer.easy] != nil {
            finish(transfer.easy, code: CURLE_OK, multi: multi)
        }
    }

    private func finish(_ easy: UnsafeMutableRawPointer, code: CURLcode, multi: UnsafeMutableRawPointer) {
        guard let transfer = transfers.removeValue(forKey: easy) else { return }
        _ = curl_multi_remove_handle(multi, easy)
        // Only a handle whose transfer ended cleanly is kept: curl keeps some state of a transfer it
        // wanted to retry on the handle (`state.retrycount`, `state.refused_stream`), which would
        // carry over to the next request.
        let reusable = code == CURLE_OK && !transfer.curlWantsRetry && !transfer.reconnectBlocked
        defer { if reusable && idleTransfers.count < Self.maxIdleTransfers { idleTransfers.append(transfer) } }
        var facts = TransferOutcome.Facts(code: code)
        facts.submitted = transfer.submitted
        facts.refusedByServer = transfer.refusedByServer
        let failed = code != CURLE_OK || transfer.curlWantsRetry || transfer.reconnectBlocked
        if failed, let last = goawayLastStreamID, let stream = transfer.streamID, stream > last {
            facts.refusedByServer = true  // RFC 9113 6.8: the server did not process it
        }
        facts.curlWantsRetry = transfer.curlWantsRetry
        facts.reconnectBlocked = transfer.reconnectBlocked
        facts.responseTooLarge = transfer.responseTooLarge
        facts.deadlinePassed = ContinuousClock.now + .milliseconds(1) >= transfer.request.deadline
        facts.connectionEstablished = established
        if code != CURLE_OK { facts.detail = transfer.errorDetail }
        let outcome = TransferOutcome(facts)
        if outcome.retireConnection { retire = true }
        if let error = outcome.error {
            end(transfer.request, .failure(error))
            return
        }
        let status = transfer.responseCode
        if status != 403 { report.answeredOtherThan403 = true }
        end(
            transfer.request,
            .success(HTTP2Response(status: status, headers: transfer.responseHeaders, body: transfer.responseBody)))
    }

    /// Ends the transfers curl has not timed out although their deadline passed (those
    /// waiting in curl for a free stream).
    private func expireOverdue(_ multi: UnsafeMutableRawPointer, now: ContinuousClock.Instant) {
        guard let earliest = earliestDeadline, earliest + Self.deadlineGrace <= now else { return }
        var next: ContinuousClock.Instant?
        for (easy, transfer) in transfers {
            let deadline = transfer.request.deadline
            if deadline + Self.deadlineGrace <= now {
                finish(easy, code: CURLE_OPERATION_TIMEDOUT, multi: multi)
            } else {
                next = min(next ?? deadline, deadline)
            }
        }
        earliestDeadline = next
    }

    /// Fails everything with `.shutdown` and leaves.
    private func shutDown(inbox: [PendingRequest]) {
        var ended: [(PendingRequest, HTTP2ClientError)] = []
        for request in inbox {
            ended.append(
                (request, HTTP2ClientError(.shutdown, "the client was shut down", mayHaveBeenProcessed: false)))
        }
        for (easy, transfer) in transfers {
            if let multi { _ = curl_multi_remove_handle(multi, easy) }
            ended.append(
                (
                    transfer.request,
                    HTTP2ClientError(
                        .shutdown, "the client was shut down", mayHaveBeenProcessed: transfer.submitted)
                ))
        }
        transfers = [:]
        core.departed(connection: self, completed: ended.count)
        for (request, error) in ended { request.completion(.failure(error)) }
    }
}
