/// The APNs request for one push (docs/DESIGN.md, "The APNs request"), minus the provider token,
/// which the transport adds.
public struct Notification: Equatable, Sendable {
    /// `/3/device/<token, lowercase hex>`
    public var path: String
    public var headers: [(name: String, value: String)]
    public var payload: [UInt8]

    public static func == (lhs: Notification, rhs: Notification) -> Bool {
        lhs.path == rhs.path && lhs.payload == rhs.payload
            && lhs.headers.map { [$0.name, $0.value] } == rhs.headers.map { [$0.name, $0.value] }
    }

    /// APNs refuses payloads above this.
    public static let maximumPayloadSize = 4096

    /// Builds the request for `push` to `token`.
    /// - Parameters:
    ///   - expiresAt: Unix seconds for `apns-expiration`, or 0 to ask for one delivery attempt only.
    public init(push: PushRequest, token: [UInt8], settings: NotificationSettings, expiresAt: UInt64) {
        path = Hex.encode(token, after: "/3/device/")
        headers = [
            ("apns-topic", settings.topic),
            ("apns-push-type", "alert"),
            ("apns-priority", "10"),
            ("apns-collapse-id", push.id),
            ("apns-expiration", String(expiresAt)),
        ]
        payload = Self.payload(placeholder: settings.placeholder, thread: push.thread, sealed: push.sealed)
    }

    /// The compact JSON payload. Every piece is already known to need no JSON escaping: the
    /// placeholder is restricted to `[A-Za-z0-9._-]`, the thread is hex, and sealed is base64.
    static func payload(placeholder: String, thread: String, sealed: String) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(96 + placeholder.utf8.count + thread.utf8.count + sealed.utf8.count)
        appendLiteral(#"{"aps":{"alert":{"loc-key":""#, to: &out)
        append(placeholder, to: &out)
        appendLiteral(#""},"mutable-content":1,"thread-id":""#, to: &out)
        append(thread, to: &out)
        appendLiteral(#""},"sealed":""#, to: &out)
        append(sealed, to: &out)
        appendLiteral(#""}"#, to: &out)
        return out
    }

    /// Appends a literal's bytes (appending a string's `utf8` view goes through its index, even a literal's).
    private static func appendLiteral(_ literal: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends `text`'s UTF-8 from its own storage (appending its `utf8` view goes element by element).
    private static func append(_ text: String, to out: inout [UInt8]) {
        if text.utf8.withContiguousStorageIfAvailable({ out.append(contentsOf: $0) }) == nil {
            out.append(contentsOf: text.utf8)
        }
    }

    /// The largest payload this configuration can produce: sealed size and thread length are fixed.
    public static func largestPayloadSize(placeholder: String) -> Int {
        payload(
            placeholder: placeholder, thread: String(repeating: "f", count: 64),
            sealed: String(repeating: "A", count: PushRequest.sealedTextLength)
        ).count
    }
}

/// The configuration pieces a notification is built from.
public struct NotificationSettings: Equatable, Sendable {
    public var topic: String
    public var placeholder: String
    /// Seconds from now for `apns-expiration`; 0 sends 0.
    public var expirationSeconds: UInt64

    public init(topic: String, placeholder: String, expirationSeconds: UInt64) {
        self.topic = topic
        self.placeholder = placeholder
        self.expirationSeconds = expirationSeconds
    }

    /// The `apns-expiration` value for a push sent at `now` (Unix seconds).
    public func expiration(now: UInt64) -> UInt64 {
        expirationSeconds == 0 ? 0 : now + expirationSeconds
    }
}
