import CNGHTTP2

/// How an nghttp2 session and the object that owns it find each other: the one helper the APNs
/// client's connection and the simulator's connection both use.
///
/// Ownership, the rule for every session in this project: the session's user-data pointer is its
/// owner, **unretained**. The owner makes the session with ``make(_:callbacks:owner:)``, keeps it
/// in a property, and deletes it (`nghttp2_session_del`) when its connection closes, and in its
/// `deinit` at the latest. nghttp2 calls back only from inside the owner's own calls into the
/// session (`nghttp2_session_mem_recv`, `nghttp2_session_mem_send`), on the owner's thread, so the
/// session never outlives the object its pointer names. A retained pointer would add a reference
/// cycle (owner, session, owner) that every exit path would have to break with exactly one release.
public enum HTTP2Session {
    /// Which end of the connection the session speaks for.
    public enum Role: Sendable {
        case client
        case server
    }

    /// A new session whose callbacks (copied from `callbacks`) reach `owner` through
    /// ``owner(_:)``; nil when nghttp2 cannot make one (out of memory).
    public static func make(_ role: Role, callbacks: OpaquePointer, owner: AnyObject) -> OpaquePointer? {
        var session: OpaquePointer?
        let userData = Unmanaged.passUnretained(owner).toOpaque()
        let result =
            switch role {
            case .client: nghttp2_session_client_new(&session, callbacks, userData)
            case .server: nghttp2_session_server_new(&session, callbacks, userData)
            }
        return result == 0 ? session : nil
    }

    /// nghttp2's words for one of its error codes (a negative result of `nghttp2_session_mem_recv` or
    /// `nghttp2_session_mem_send`), such as "Protocol error".
    public static func words(ofError code: Int) -> String {
        String(cString: nghttp2_strerror(Int32(clamping: code)))
    }

    /// The owner behind a callback's user-data pointer (a session made by ``make(_:callbacks:owner:)``
    /// for an `Owner`).
    public static func owner<Owner: AnyObject>(_ userData: UnsafeMutableRawPointer) -> Owner {
        Unmanaged<Owner>.fromOpaque(userData).takeUnretainedValue()
    }
}
