/// The body of a `POST /v1/push`, for the tests that send one: every field given, in the order a channel's client
/// writes them. `sealed` is the base64 text as sent (a test of a malformed field passes its own).
public enum PushBody {
    /// 64 hex digits, a valid `id` or `thread`.
    public static let hex64 = String(repeating: "a", count: 64)

    /// The body's JSON text.
    public static func text(grant: String, sealed: String, id: String = hex64, thread: String = hex64) -> String {
        #"{"grant":"\#(grant)","sealed":"\#(sealed)","id":"\#(id)","thread":"\#(thread)"}"#
    }

    /// The body's bytes.
    public static func bytes(grant: String, sealed: String, id: String = hex64, thread: String = hex64) -> [UInt8] {
        Array(text(grant: grant, sealed: sealed, id: id, thread: thread).utf8)
    }
}
