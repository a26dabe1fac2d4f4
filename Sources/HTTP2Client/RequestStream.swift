/// One request handed to nghttp2, from `nghttp2_submit_request` until its stream closes: what
/// the connection has sent of it and what it has received.
final class RequestStream {
    let pending: PendingRequest
    let id: Int32
    /// Bytes of the body handed to nghttp2 so far.
    var bodyOffset = 0
    /// Its HEADERS frame went out: from now on the server may process it.
    var sent = false
    /// The final `:status` (informational 1xx answers are skipped).
    var status: Int?
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []
    /// The answer ended (END_STREAM received).
    var ended = false
    /// The body passed `ClientSettings.maxResponseBodyBytes`: the stream was cancelled.
    var tooLarge = false

    init(pending: PendingRequest, id: Int32) {
        self.pending = pending
        self.id = id
    }

    var request: HTTP2Request { pending.request }
}
