import CCurl

/// One try of one request on one connection: the curl easy handle and everything curl reads
/// or writes while it runs. It lives on its connection's thread only, and owns the easy handle,
/// the header list and the body buffer, which curl uses until the transfer is removed from the
/// multi handle; the connection removes it before releasing it.
final class Transfer {
    /// Larger answers fail with `.protocolError` (an APNs answer is a few hundred bytes).
    static let maxResponseBodyBytes = 1 << 20

    let request: PendingRequest
    let easy: UnsafeMutableRawPointer
    unowned let connection: Connection
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let body: UnsafeMutableRawBufferPointer
    private let errorText: UnsafeMutablePointer<CChar>

    var responseHeaders: [(name: String, value: String)] = []
    var responseBody: [UInt8] = []
    var responseTooLarge = false
    /// curl reached the point of sending the request (`CURLOPT_PREREQFUNCTION` ran): from here
    /// on the server may have it.
    var submitted = false
    /// curl logged that the server refused the stream (RST_STREAM REFUSED_STREAM, or a stream
    /// above a GOAWAY's last stream id).
    var refusedByServer = false
    /// curl logged that it wants to send the request again on a new connection; the connection
    /// aborts the transfer instead (see `Connection`).
    var curlWantsRetry = false
    /// curl tried to open a second TCP connection for this transfer and was refused.
    var reconnectBlocked = false

    /// Sets up the easy handle; fails with `.protocolError` if curl refuses an option.
    init(request: PendingRequest, connection: Connection, settings: TransferSettings) throws(HTTP2ClientError) {
        guard let easy = curl_easy_init() else {
            throw HTTP2ClientError(.protocolError, "curl_easy_init failed", mayHaveBeenProcessed: false)
        }
        self.easy = easy
        self.request = request
        self.connection = connection
        let bodyBytes = request.request.body
        body = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bodyBytes.count, 1), alignment: 1)
        body.copyBytes(from: bodyBytes)
        errorText = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorText.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        try configure(settings: settings, now: .now)
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(headerList)
        body.deallocate()
        errorText.deallocate()
    }

    /// curl's error text for this transfer (CURLOPT_ERRORBUFFER), empty if none.
    var errorDetail: String { String(cString: errorText) }

    private func configure(settings: TransferSettings, now: ContinuousClock.Instant) throws(HTTP2ClientError) {
        var failed: CURLoption?
        func set(_ option: CURLoption, _ value: Int) {
            if CCurl_easy_setopt_long(easy, option, value) != CURLE_OK && failed == nil { failed = option }
        }
        func set(_ option: CURLoption, _ value: String) {
            if CCurl_easy_setopt_string(easy, option, value) != CURLE_OK && failed == nil { failed = option }
        }
        func check(_ code: CURLcode, _ option: CURLoption) {
            if code != CURLE_OK && failed == nil { failed = option }
        }
        let http = request.request
        set(CURLOPT_URL, settings.origin + http.path)
        set(CURLOPT_PROTOCOLS_STR, "https")
        set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
        set(CURLOPT_SSLVERSION, CURL_SSLVERSION_TLSv1_2)
        set(CURLOPT_PIPEWAIT, 1)
        set(CURLOPT_NOSIGNAL, 1)
        // Keep idle connections: curl 7.88.1 closes them after 118 s by default.
        set(CURLOPT_MAXAGE_CONN, 365 * 24 * 3600)
        set(CURLOPT_TCP_KEEPALIVE, 1)
        set(CURLOPT_TCP_KEEPIDLE, 30)
        set(CURLOPT_TCP_KEEPINTVL, 15)
        let remaining = max(Self.milliseconds(now.duration(to: request.deadline)), 1)
        set(CURLOPT_TIMEOUT_MS, remaining)
        set(CURLOPT_CONNECTTIMEOUT_MS, min(max(Self.milliseconds(settings.connectTimeout), 1), remaining))
        switch settings.trust {
        case .system: break
        case .fileAndSystemDirectory(let file, let directory):
            set(CURLOPT_CAINFO, file)
            set(CURLOPT_CAPATH, directory)
        case .bundle(let bundle):
            var blob = curl_blob(data: bundle.bytes.baseAddress, len: bundle.count, flags: UInt32(CURL_BLOB_NOCOPY))
            check(CCurl_easy_setopt_pointer(easy, CURLOPT_CAINFO_BLOB, &blob), CURLOPT_CAINFO_BLOB)
        }

        switch http.method {
        case "GET" where http.body.isEmpty:
            set(CURLOPT_HTTPGET, 1)
        case "HEAD" where http.body.isEmpty:
            set(CURLOPT_NOBODY, 1)
        case _ where http.method == "POST" || !http.body.isEmpty:
            set(CURLOPT_POST, 1)
            check(CCurl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, http.body.count), CURLOPT_POSTFIELDSIZE_LARGE)
            check(CCurl_easy_setopt_pointer(easy, CURLOPT_POSTFIELDS, body.baseAddress), CURLOPT_POSTFIELDS)
            if http.method != "POST" { set(CURLOPT_CUSTOMREQUEST, http.method) }
        default:
            set(CURLOPT_CUSTOMREQUEST, http.method)
        }

        // curl would add `Accept: */*`, `Expect: 100-continue` and a form content type:
        // an empty value removes a header curl adds by itself.
        var list: UnsafeMutablePointer<curl_slist>?
        var names = Set<String>()
        for (name, value) in http.headers {
            let lower = name.lowercased()
            names.insert(lower)
            list = curl_slist_append(list, value.isEmpty ? "\(lower);" : "\(lower): \(value)")
        }
        for implicit in ["accept", "expect", "content-type"] where !names.contains(implicit) {
            list = curl_slist_append(list, "\(implicit):")
        }
        headerList = list
        check(CCurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, list), CURLOPT_HTTPHEADER)

        check(CCurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorText), CURLOPT_ERRORBUFFER)
        let me = Unmanaged.passUnretained(self).toOpaque()
        check(CCurl_easy_setopt_write_callback(easy, transferWriteCallback), CURLOPT_WRITEFUNCTION)
        check(CCurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, me), CURLOPT_WRITEDATA)
        check(CCurl_easy_setopt_header_callback(easy, transferHeaderCallback), CURLOPT_HEADERFUNCTION)
        check(CCurl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, me), CURLOPT_HEADERDATA)
        check(CCurl_easy_setopt_prereq_callback(easy, transferPrereqCallback), CURLOPT_PREREQFUNCTION)
        check(CCurl_easy_setopt_pointer(easy, CURLOPT_PREREQDATA, me), CURLOPT_PREREQDATA)
        check(CCurl_easy_setopt_opensocket_callback(easy, transferOpenSocketCallback), CURLOPT_OPENSOCKETFUNCTION)
        check(CCurl_easy_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, me), CURLOPT_OPENSOCKETDATA)
        // curl tells of GOAWAY and of its own retries only in its verbose log.
        check(CCurl_easy_setopt_debug_callback(easy, transferDebugCallback), CURLOPT_DEBUGFUNCTION)
        check(CCurl_easy_setopt_pointer(easy, CURLOPT_DEBUGDATA, me), CURLOPT_DEBUGDATA)
        set(CURLOPT_VERBOSE, 1)

        if let failed {
            throw HTTP2ClientError(
                .protocolError, "curl refused option \(failed.rawValue)", mayHaveBeenProcessed: false)
        }
    }

    static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }

    /// The HTTP status curl parsed, 0 if none.
    var responseCode: Int {
        var code = 0
        _ = CCurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    // MARK: Callback bodies (called on the connection's thread, inside curl_multi_perform)

    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard responseBody.count + bytes.count <= Self.maxResponseBodyBytes else {
            responseTooLarge = true
            return false
        }
        responseBody.append(contentsOf: bytes)
        return true
    }

    func receiveHeaderLine(_ bytes: UnsafeRawBufferPointer) {
        var line = Substring(decoding: bytes, as: UTF8.self)
        while let last = line.last, last == "\r" || last == "\n" { line = line.dropLast() }
        if line.isEmpty { return }
        if line.hasPrefix("HTTP/") {
            responseHeaders.removeAll()  // a new (final) response head starts
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let name = line[..<colon].lowercased()
        let value = line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
        responseHeaders.append((name: name, value: String(value)))
    }

    func logLine(_ text: UnsafeRawBufferPointer) {
        if text.starts(with: Self.refusedText) {
            refusedByServer = true
        } else if text.starts(with: Self.retryText) {
            curlWantsRetry = true
            connection.transferWantsRetry(self)
        } else if text.starts(with: Self.goawayText) || text.starts(with: Self.goawayTextFixed) {
            connection.goawayReceived()
        }
    }

    // The lines of curl 7.88.1 (lib/transfer.c Curl_retry_request, lib/http2.c on_frame_recv).
    private static let refusedText = Array("REFUSED_STREAM, retrying".utf8)
    private static let retryText = Array("Connection died, retrying".utf8)
    private static let goawayText = Array("recveived GOAWAY".utf8)
    private static let goawayTextFixed = Array("received GOAWAY".utf8)
}
