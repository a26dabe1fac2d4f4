import Foundation
import RelayCrypto

/// How an ``APNsSimulator`` listens and what it accepts.
public struct SimulatorConfiguration: Sendable {
    /// The address to bind (an IP address or a name that resolves locally). Default loopback.
    public var host: String = "127.0.0.1"
    /// The TCP port; 0 picks an ephemeral port (read it back from ``APNsSimulator/port``).
    public var port: UInt16 = 0
    /// The server certificate (PEM), for example ``SimulatorPKI/certificatePEM``.
    public var certificatePEM: String
    /// The server certificate's private key (PEM).
    public var privateKeyPEM: String
    /// The team id that provider tokens must carry as `iss`.
    public var teamID: String
    /// The provider-token public keys, by key id (`kid`).
    public var keys: [String: P256.Signing.PublicKey]
    /// The accepted `apns-topic` values.
    public var topics: Set<String>
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` once a connection has presented a valid provider token.
    public var maxConcurrentStreams: UInt32 = 1000
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` of a new connection, before it has presented a valid token.
    ///
    /// APNs allows one stream; streams beyond it are refused with `REFUSED_STREAM`.
    /// Benchmarks whose client opens many streams at once may raise it.
    public var initialMaxConcurrentStreams: UInt32 = 1
    /// How many of the latest delivered notifications ``APNsSimulator/delivered`` keeps in memory;
    /// older ones are forgotten (the record file keeps every one). Bounds a long-running simulator.
    public var retainedDeliveries: Int = 10_000
    /// Faults by device-token prefix, for every valid request whose token starts with one (the
    /// longest matching prefix wins); they take precedence over queued and default faults.
    public var tokenFaults: [TokenFault] = []
    /// When set, every delivered notification is appended to this file as one JSON line.
    public var recordFile: String? = nil
    /// Called on a simulator thread for each delivered notification, after it was recorded.
    public var onDeliver: (@Sendable (DeliveredNotification) -> Void)? = nil
    /// The `reason` a GOAWAY of ``SimulatorFault/goaway`` carries in its debug data, as APNs does
    /// (`{"reason":"Shutdown"}`); nil sends none.
    public var goawayReason: String? = nil
    /// When set, the simulator is a plain HTTP/2 test server (for the APNs client's own tests): it asks for no
    /// provider token and makes none of APNs's checks, allows ``maxConcurrentStreams`` from the first SETTINGS,
    /// and answers every request, whatever its method and path, with what this returns (called on a simulator
    /// thread). Faults still apply: ``APNsSimulator/setFaultPlan(_:)``, queued and default faults (not the
    /// device-token ones). Nothing is recorded as delivered.
    public var responder: (@Sendable (SimulatorRequest) -> SimulatorResponse)? = nil
    /// The clock used for provider-token `iat` checks and the 410 `timestamp`.
    public var now: @Sendable () -> Date = { Date() }

    /// Creates a configuration; only the certificate, key, team id, keys and topics are required.
    public init(
        host: String = "127.0.0.1", port: UInt16 = 0, certificatePEM: String, privateKeyPEM: String, teamID: String,
        keys: [String: P256.Signing.PublicKey], topics: Set<String>, maxConcurrentStreams: UInt32 = 1000,
        recordFile: String? = nil, onDeliver: (@Sendable (DeliveredNotification) -> Void)? = nil,
        now: @escaping @Sendable () -> Date = { Date() }, initialMaxConcurrentStreams: UInt32 = 1
    ) {
        self.host = host
        self.port = port
        self.certificatePEM = certificatePEM
        self.privateKeyPEM = privateKeyPEM
        self.teamID = teamID
        self.keys = keys
        self.topics = topics
        self.maxConcurrentStreams = maxConcurrentStreams
        self.recordFile = recordFile
        self.onDeliver = onDeliver
        self.now = now
        self.initialMaxConcurrentStreams = initialMaxConcurrentStreams
    }
}
