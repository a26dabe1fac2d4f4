/// Why the relay asked to try again later.
public struct RetryReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// 429 `"limit":"phone"`: this phone has had its pushes for now.
    public static let phoneLimit = RetryReason(rawValue: "phone")
    /// 429 `"limit":"address"`: this client address sent too many requests.
    public static let addressLimit = RetryReason(rawValue: "address")
    /// 429 `"limit":"apns"`: APNs answered TooManyRequests.
    public static let apnsLimit = RetryReason(rawValue: "apns")
    /// 503 `overloaded`: the relay is shedding load or stopping.
    public static let overloaded = RetryReason(rawValue: "overloaded")

    public var description: String { rawValue }
}
