import CCurl
import Glibc

/// A curl easy handle of one connection and everything curl reads or writes while it runs one
/// try of one request. It lives on its connection's thread only. The connection reuses it for
/// request after request (`start`), so the options that never change are set once; the header
/// list and the body buffer it owns are used by curl until the transfer is removed from the multi
/// handle, and are rewritten only by the next `start`, after that.
final class Transfer {
    /// Larger answers fail with `.protocolError` (an APNs answer is a few hundred bytes).
    static let maxResponseBodyBytes = 1 << 20

    /// The request of the current try (set by `start`).
    private(set) var request: PendingRequest
    let easy: UnsafeMutableRawPointer
    unowned let connection: Connection
    private let settings: TransferSettings
    private var headerList = HeaderList()
    private var body: UnsafeMutableRawBufferPointer
    private let errorText: UnsafeMutablePointer<CChar>
    /// The method and body shape the handle's request options are set for (nil: none yet).
    private var shape: Shape?

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
    /// The HTTP/2 stream id of this transfer, from curl's "Using Stream ID" line.
    var streamID: Int?

    /// How a request is sent: the options that depend on it are set only when it changes.
    private enum Shape: Equatable {
        case get
        case head
        case post
        case custom(String, hasBody: Bool)
    }

    /// Creates the easy handle and sets the options every request shares; fails with
    /// `.protocolError` if curl refuses one. `start` sets those of a request.
    init(request: PendingRequest, connection: Connection, settings: TransferSettings) throws(HTTP2ClientError) {
        guard let easy = curl_easy_init() else {
            throw HTTP2ClientError(.protocolError, "curl_easy_init failed", mayHaveBeenProcessed: false)
        }
        self.easy = easy
        self.request = request
        self.connection = connection
        self.settings = settings
        body = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 1)
        errorText = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorText.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        try configureHandle()
        try start(request, now: .now)
    }

    deinit {
        curl_easy_cleanup(easy)
        body.deallocate()
        errorText.deallocate()
    }

    /// curl's error text for this transfer (CURLOPT_ERRORBUFFER), empty if none.
    var errorDetail: String { String(cString: errorText) }

    /// Prepares the handle for `request` (a new try): clears what the last one left and sets the
    /// options that depend on the request. The handle must not be in the multi handle.
    func start(_ request: PendingRequest, now: ContinuousClock.Instant) throws(HTTP2ClientError) {
        self.request = request
        responseHeaders = []
        responseBody = []
        responseTooLarge = false
        submitted = false
        refusedByServer = false
        curlWantsRetry = false
        reconnectBlocked = false
        streamID = nil
        errorText.pointee = 0
        try configureRequest(now: now)
    }

    private func fail(_ option: CURLoption) -> HTTP2ClientError {
        HTTP2ClientError(.protocolError, "curl refused option \(option.rawValue)", mayHaveBeenProcessed: false)
    }

    /// The options every request of the connection shares, set once per handle (and again after
    /// `curl_easy_reset`).
    private func configureHandle() throws(HTTP2ClientError) {
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
        set(CURLOPT_PROTOCOLS_STR, "https")
        // No proxy from the environment (curl would read http_proxy & co. for every transfer).
        set(CURLOPT_PROXY, "")
        set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
        set(CURLOPT_SSLVERSION, CURL_SSLVERSION_TLSv1_2)
        set(CURLOPT_PIPEWAIT, 1)
        set(CURLOPT_NOSIGNAL, 1)
        // Keep idle connections: curl 7.88.1 closes them after 118 s by default.
        set(CURLOPT_MAXAGE_CONN, 365 * 24 * 3600)
        set(CURLOPT_TCP_KEEPALIVE, 1)
        set(CURLOPT_TCP_KEEPIDLE, 30)
        set(CURLOPT_TCP_KEEPINTVL, 15)
        // The handle is kept between requests, and with it curl's upload buffer (64 KiB by default,
        // for request bodies of a few KiB): the smallest curl accepts.
        set(CURLOPT_UPLOAD_BUFFERSIZE, 16 * 1024)
        switch settings.trust {
        case .system: break
        case .fileAndSystemDirectory(let file, let directory):
            set(CURLOPT_CAINFO, file)
            set(CURLOPT_CAPATH, directory)
        case .bundle(let bundle):
            var blob = curl_blob(data: bundle.bytes.baseAddress, len: bundle.count, flags: UInt32(CURL_BLOB_NOCOPY))
            check(CCurl_easy_setopt_pointer(easy, CURLOPT_CAINFO_BLOB, &blob), CURLOPT_CAINFO_BLOB)
        }
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
        if let failed { throw fail(failed) }
    }

    /// The options of one request: URL, timeouts, method and body, headers.
    private func configureRequest(now: ContinuousClock.Instant) throws(HTTP2ClientError) {
        let http = request.request
        let shape: Shape
        switch http.method {
        case "GET" where http.body.isEmpty: shape = .get
        case "HEAD" where http.body.isEmpty: shape = .head
        case "POST": shape = .post
        default: shape = .custom(http.method, hasBody: !http.body.isEmpty)
        }
        if let previous = self.shape, previous != shape {
            // Method options (POST, NOBODY, CUSTOMREQUEST…) do not simply undo one another:
            // start from curl's defaults.
            self.shape = nil
            curl_easy_reset(easy)
            try configureHandle()
        }

        var failed: CURLoption?
        func set(_ option: CURLoption, _ value: Int) {
            if CCurl_easy_setopt_long(easy, option, value) != CURLE_OK && failed == nil { failed = option }
        }
        func check(_ code: CURLcode, _ option: CURLoption) {
            if code != CURLE_OK && failed == nil { failed = option }
        }
        let url = settings.origin + http.path
        check(CCurl_easy_setopt_string(easy, CURLOPT_URL, url), CURLOPT_URL)
        let remaining = max(Self.milliseconds(now.duration(to: request.deadline)), 1)
        set(CURLOPT_TIMEOUT_MS, remaining)
        set(CURLOPT_CONNECTTIMEOUT_MS, min(max(Self.milliseconds(settings.connectTimeout), 1), remaining))

        if self.shape == nil {
            switch shape {
            case .get: set(CURLOPT_HTTPGET, 1)
            case .head: set(CURLOPT_NOBODY, 1)
            case .post: set(CURLOPT_POST, 1)
            case .custom(let method, let hasBody):
                if hasBody { set(CURLOPT_POST, 1) }
                check(CCurl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method), CURLOPT_CUSTOMREQUEST)
            }
        }
        switch shape {
        case .post, .custom(_, hasBody: true):
            let bytes = http.body
            if bytes.count > body.count {
                body.deallocate()
                body = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
            }
            body.copyBytes(from: bytes)
            check(CCurl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, bytes.count), CURLOPT_POSTFIELDSIZE_LARGE)
            check(CCurl_easy_setopt_pointer(easy, CURLOPT_POSTFIELDS, body.baseAddress), CURLOPT_POSTFIELDS)
        case .get, .head, .custom: break
        }
        check(CCurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList.build(http.headers)), CURLOPT_HTTPHEADER)
        if let failed {
            self.shape = nil
            throw fail(failed)
        }
        self.shape = shape
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
        var end = bytes.count
        while end > 0 && (bytes[end - 1] == 0x0D || bytes[end - 1] == 0x0A) { end -= 1 }
        guard end > 0 else { return }
        if end >= 5 && memcmp(bytes.baseAddress!, Self.statusLinePrefix.utf8Start, 5) == 0 {
            responseHeaders.removeAll()  // a new (final) response head starts
            return
        }
        guard let colon = bytes[..<end].firstIndex(of: UInt8(ascii: ":")) else { return }
        var start = colon + 1
        while start < end && (bytes[start] == 0x20 || bytes[start] == 0x09) { start += 1 }
        let name = String(unsafeUninitializedCapacity: colon) { buffer in
            for offset in 0..<colon {
                let byte = bytes[offset]
                buffer[offset] = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
            }
            return colon
        }
        let value = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        responseHeaders.append((name: name, value: value))
    }

    private static let statusLinePrefix: StaticString = "HTTP/"

    func logLine(_ text: UnsafeRawBufferPointer) {
        // Called for every informational line curl writes: compare bytes, cheaply.
        guard let first = text.first,
            first == UInt8(ascii: "U") || first == UInt8(ascii: "R") || first == UInt8(ascii: "C")
                || first == UInt8(ascii: "r")
        else { return }
        if Self.has(text, prefix: Self.streamIDText) {
            streamID = Self.number(in: text, after: Self.streamIDText.utf8CodeUnitCount)
        } else if Self.has(text, prefix: Self.refusedText) {
            refusedByServer = true
        } else if Self.has(text, prefix: Self.retryText) {
            curlWantsRetry = true
            connection.transferWantsRetry(self)
        } else if Self.has(text, prefix: Self.goawayText) || Self.has(text, prefix: Self.goawayTextFixed) {
            // "recveived GOAWAY, error=%d, last_stream=%u"
            let marker: StaticString = "last_stream="
            var lastStream: Int?
            for offset in 0..<max(text.count - marker.utf8CodeUnitCount, 0)
            where memcmp(text.baseAddress! + offset, marker.utf8Start, marker.utf8CodeUnitCount) == 0 {
                lastStream = Self.number(in: text, after: offset + marker.utf8CodeUnitCount)
                break
            }
            connection.goawayReceived(lastStreamID: lastStream)
        }
    }

    private static func number(in text: UnsafeRawBufferPointer, after offset: Int) -> Int? {
        var value: Int?
        for byte in text[offset...] {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { break }
            value = (value ?? 0) &* 10 &+ Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    private static func has(_ text: UnsafeRawBufferPointer, prefix: StaticString) -> Bool {
        let count = prefix.utf8CodeUnitCount
        return text.count >= count && memcmp(text.baseAddress!, prefix.utf8Start, count) == 0
    }

    // The lines of curl 7.88.1 (lib/transfer.c Curl_retry_request; lib/http2.c on_frame_recv and
    // http2_send). "REFUSED_STREAM, retrying" is logged only for a refused stream on a connection
    // that was not reused; on a reused one curl logs only "Connection died, retrying".
    private static let streamIDText: StaticString = "Using Stream ID: "
    private static let refusedText: StaticString = "REFUSED_STREAM, retrying"
    private static let retryText: StaticString = "Connection died, retrying"
    private static let goawayText: StaticString = "recveived GOAWAY"
    private static let goawayTextFixed: StaticString = "received GOAWAY"
}
