/// What a grant carries: the phone's APNs device token, its environment and when it was issued.
public struct Grant: Equatable, Sendable {
    public var environment: APNsEnvironment
    /// Unix seconds.
    public var issuedAt: UInt64
    /// Raw token bytes (decoded from hex).
    public var token: [UInt8]

    public init(environment: APNsEnvironment, issuedAt: UInt64, token: [UInt8]) {
        self.environment = environment
        self.issuedAt = issuedAt
        self.token = token
    }
}
