import HTTP2Wire

/// One request handed to nghttp2, from `nghttp2_submit_request` until its stream closes: what
/// the connection has sent of it and what it has received.
final class RequestStream {
    let pending: PendingRequest
    let id: Int32
    /// The request's body, handed to nghttp2 a part at a time.
    var outgoing: OutgoingBody
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
        outgoing = OutgoingBody(pending.request.body)
    }

    var request: HTTP2Request { pending.request }
}
