/// Counters of what the simulator has seen since it started.
public struct SimulatorStatistics: Sendable, Equatable {
    /// TCP connections accepted.
    public var connectionsAccepted: Int = 0
    /// Requests received completely (END_STREAM) and answered, faulted or held; requests that
    /// arrived above a GOAWAY's last-stream-id are not counted.
    public var requests: Int = 0
    /// Notifications answered 200 (all of them, also those ``APNsSimulator/delivered`` no longer keeps).
    public var delivered: Int = 0
    /// Distinct provider-token strings presented (valid or not).
    public var distinctProviderTokens: Int = 0
    /// The most streams any one connection had open at the same time.
    public var maxConcurrentStreamsSeen: Int = 0
    /// GOAWAY frames sent because of ``SimulatorFault/goaway``.
    public var goawaysSent: Int = 0
    /// PING frames received (and answered): a client's liveness checks.
    public var pingsReceived: Int = 0
    /// Streams refused unprocessed with RST_STREAM (REFUSED_STREAM) because of ``SimulatorFault/resetStream``.
    public var streamsRefused: Int = 0
    /// Connections closed without an answer because of ``SimulatorFault/dropConnection`` or
    /// ``SimulatorFault/resetConnection``.
    public var connectionsDropped: Int = 0

    /// Creates zeroed counters.
    public init() {}
}
