import CNGHTTP2
import HTTP2Sessions

/// The nghttp2 client callbacks: non-capturing functions that find their ``HTTP2ClientConnection``
/// through the session's user data (``HTTP2Session``, which states who owns what). nghttp2 calls them
/// only from inside the connection's own `nghttp2_session_mem_recv` and `nghttp2_session_mem_send`, on its
/// loop's thread.
enum ClientCallbacks {
    /// One callback table for every session of the process (nghttp2 copies it into each session).
    nonisolated(unsafe) static let table: OpaquePointer = {
        var table: OpaquePointer?
        precondition(nghttp2_session_callbacks_new(&table) == 0, "nghttp2_session_callbacks_new failed")
        nghttp2_session_callbacks_set_on_header_callback(table, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(table, onDataChunk)
        nghttp2_session_callbacks_set_on_frame_recv_callback(table, onFrameReceived)
        nghttp2_session_callbacks_set_on_frame_send_callback(table, onFrameSent)
        nghttp2_session_callbacks_set_on_frame_not_send_callback(table, onFrameNotSent)
        nghttp2_session_callbacks_set_on_stream_close_callback(table, onStreamClose)
        return table!
    }()

    static let readRequestBody: nghttp2_data_source_read_callback = { _, stream, buffer, length, flags, _, user in
        guard let user, let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
        return connection(user).readRequestBody(stream: stream, into: buffer, length: length, flags: flags)
    }

    private static func connection(_ user: UnsafeMutableRawPointer) -> HTTP2ClientConnection {
        HTTP2Session.owner(user)
    }

    private static let onHeader: nghttp2_on_header_callback = {
        _, frame, name, nameLength, value, valueLength, _, user in
        guard let frame, let user, let name, let value, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue)
        else { return 0 }
        connection(user).headerReceived(
            stream: frame.pointee.hd.stream_id, name: UnsafeBufferPointer(start: name, count: nameLength),
            value: UnsafeBufferPointer(start: value, count: valueLength))
        return 0
    }

    private static let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, stream, data, length, user in
        guard let user, let data else { return 0 }
        connection(user).bodyReceived(stream: stream, UnsafeBufferPointer(start: data, count: length))
        return 0
    }

    private static let onFrameReceived: nghttp2_on_frame_recv_callback = { _, frame, user in
        guard let frame, let user else { return 0 }
        let header = frame.pointee.hd
        switch Int(header.type) {
        case Int(NGHTTP2_GOAWAY.rawValue):
            let goaway = frame.pointee.goaway
            connection(user).goawayReceived(
                lastStreamID: goaway.last_stream_id, errorCode: goaway.error_code,
                debugData: UnsafeBufferPointer(start: goaway.opaque_data, count: goaway.opaque_data_len))
        case Int(NGHTTP2_PING.rawValue):
            if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 { connection(user).pingAnswered() }
        case Int(NGHTTP2_DATA.rawValue), Int(NGHTTP2_HEADERS.rawValue):
            if header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 {
                connection(user).answerEnded(stream: header.stream_id)
            }
        default:
            break
        }
        return 0
    }

    private static let onFrameSent: nghttp2_on_frame_send_callback = { _, frame, user in
        guard let frame, let user, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
        connection(user).requestSent(stream: frame.pointee.hd.stream_id)
        return 0
    }

    private static let onFrameNotSent: nghttp2_on_frame_not_send_callback = { _, frame, _, user in
        guard let frame, let user, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
        connection(user).requestNotSent(stream: frame.pointee.hd.stream_id)
        return 0
    }

    private static let onStreamClose: nghttp2_on_stream_close_callback = { _, stream, errorCode, user in
        guard let user else { return 0 }
        connection(user).streamClosed(stream, errorCode: errorCode)
        return 0
    }
}
