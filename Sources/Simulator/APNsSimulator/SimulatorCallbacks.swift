import CNGHTTP2
import HTTP2Sessions

/// The nghttp2 callbacks: non-capturing functions that find their ``SimulatorConnection`` through the
/// session's user data (``HTTP2Session``, which states who owns what).
enum SimulatorCallbacks {
    static func install(in table: OpaquePointer) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(table, onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(table, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(table, onDataChunk)
        nghttp2_session_callbacks_set_on_frame_recv_callback(table, onFrame)
        nghttp2_session_callbacks_set_on_stream_close_callback(table, onStreamClose)
    }

    static let readResponseBody: nghttp2_data_source_read_callback = { _, stream, buffer, length, flags, _, user in
        guard let user, let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
        return connection(user).readResponseBody(stream: stream, into: buffer, length: length, flags: flags)
    }

    private static func connection(_ user: UnsafeMutableRawPointer) -> SimulatorConnection { HTTP2Session.owner(user) }

    private static func isRequestHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Bool {
        frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue)
            && frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
    }

    private static let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, user in
        guard let frame, let user, isRequestHeaders(frame) else { return 0 }
        connection(user).streamOpened(frame.pointee.hd.stream_id)
        return 0
    }

    private static let onHeader: nghttp2_on_header_callback = {
        _, frame, name, nameLength, value, valueLength, _, user in
        guard let frame, let user, let name, let value, isRequestHeaders(frame) else { return 0 }
        let owner = connection(user)
        // Quick filter before making strings: interpreted names start with ':' or 'a' and are short (a plain
        // HTTP/2 simulator keeps every header).
        guard owner.isPlain || (nameLength <= 16 && (name[0] == UInt8(ascii: ":") || name[0] == UInt8(ascii: "a")))
        else { return 0 }
        owner.streams[frame.pointee.hd.stream_id]?.addHeader(
            name: String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self),
            value: String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self))
        return 0
    }

    private static let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, stream, data, length, user in
        guard let user, let data else { return 0 }
        connection(user).streams[stream]?.appendBody(UnsafeBufferPointer(start: data, count: length))
        return 0
    }

    private static let onFrame: nghttp2_on_frame_recv_callback = { _, frame, user in
        guard let frame, let user else { return 0 }
        let type = frame.pointee.hd.type
        if type == UInt8(NGHTTP2_PING.rawValue) && frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 {
            connection(user).pingReceived()
            return 0
        }
        guard type == UInt8(NGHTTP2_DATA.rawValue) || type == UInt8(NGHTTP2_HEADERS.rawValue),
            frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        else { return 0 }
        connection(user).streamEnded(frame.pointee.hd.stream_id)
        return 0
    }

    private static let onStreamClose: nghttp2_on_stream_close_callback = { _, stream, _, user in
        guard let user else { return 0 }
        connection(user).streamClosed(stream)
        return 0
    }
}
