import Foundation

/// One push a channel sends (`POST /v1/push`): the end-to-end encrypted message and its two HMACs.
public struct RelayPush: Sendable, Equatable {
    /// The size every `sealed` message has.
    public static let sealedByteCount = 2934

    /// The end-to-end encrypted message, exactly ``sealedByteCount`` bytes (sent as standard base64).
    public var sealed: Data
    /// 64 hex characters: the channel's HMAC of the answer. APNs uses it as the collapse id, so a
    /// retry with the same `id` replaces the notification on the phone rather than adding one.
    public var id: String
    /// 64 hex characters: the channel's HMAC of the room (the notification's thread).
    public var thread: String

    public init(sealed: Data, id: String, thread: String) {
        self.sealed = sealed
        self.id = id
        self.thread = thread
    }

    /// The JSON body of `POST /v1/push` for `grant`, for a channel that posts it with an HTTP library of its
    /// own (and reads the answer with ``RelayAnswer`` and ``PushOutcome``).
    public func body(grant: String) -> Data {
        let object = ["grant": grant, "sealed": sealed.base64EncodedString(), "id": id, "thread": thread]
        // Four strings always serialize.
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    }
}
