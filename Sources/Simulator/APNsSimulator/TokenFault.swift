/// A fault the simulator plays for every valid request whose device token starts with a prefix:
/// the command line's `--fault PREFIX=OUTCOME`, so that a channel's own tests can meet every APNs
/// answer by choosing the phone's token.
public struct TokenFault: Sendable, Equatable {
    /// Lowercase hex digits the device token starts with.
    public let prefix: String
    public let fault: SimulatorFault

    public init(prefix: String, fault: SimulatorFault) {
        self.prefix = prefix.lowercased()
        self.fault = fault
    }

    /// One outcome a prefix can be given, by name.
    public struct Outcome: Sendable {
        public let name: String
        public let fault: SimulatorFault
        /// What APNs does, in a few words, for `--help`.
        public let summary: String
    }

    /// Every outcome `--fault` accepts.
    public static let outcomes: [Outcome] = [
        Outcome(name: "unregistered", fault: .status(410, reason: "Unregistered"), summary: "410 Unregistered"),
        Outcome(name: "expired-token", fault: .status(410, reason: "ExpiredToken"), summary: "410 ExpiredToken"),
        Outcome(
            name: "bad-device-token", fault: .status(400, reason: "BadDeviceToken"), summary: "400 BadDeviceToken"),
        Outcome(
            name: "not-for-topic", fault: .status(400, reason: "DeviceTokenNotForTopic"),
            summary: "400 DeviceTokenNotForTopic"),
        Outcome(
            name: "too-many-requests", fault: .status(429, reason: "TooManyRequests"), summary: "429 TooManyRequests"),
        Outcome(
            name: "too-many-token-updates", fault: .status(429, reason: "TooManyProviderTokenUpdates"),
            summary: "429 TooManyProviderTokenUpdates"),
        Outcome(
            name: "expired-provider-token", fault: .status(403, reason: "ExpiredProviderToken"),
            summary: "403 ExpiredProviderToken"),
        Outcome(
            name: "invalid-provider-token", fault: .status(403, reason: "InvalidProviderToken"),
            summary: "403 InvalidProviderToken"),
        Outcome(
            name: "internal-error", fault: .status(500, reason: "InternalServerError"),
            summary: "500 InternalServerError"),
        Outcome(
            name: "unavailable", fault: .status(503, reason: "ServiceUnavailable"), summary: "503 ServiceUnavailable"),
        Outcome(name: "shutdown", fault: .status(503, reason: "Shutdown"), summary: "503 Shutdown"),
        Outcome(name: "stall", fault: .stall, summary: "never answers the stream"),
        Outcome(name: "slow", fault: .delay(.seconds(2)), summary: "delivers, answers 200 after 2 s"),
        Outcome(name: "goaway", fault: .goaway, summary: "GOAWAY: the request is refused unprocessed"),
        Outcome(name: "reset", fault: .resetStream, summary: "RST_STREAM REFUSED_STREAM, unprocessed"),
        Outcome(name: "drop", fault: .dropConnection, summary: "closes the TCP connection without answering"),
    ]

    /// Parses `PREFIX=OUTCOME`: 1 to 64 hex digits (either case), and one of ``outcomes``' names.
    public init(parsing text: String) throws(SimulatorError) {
        guard let equals = text.firstIndex(of: "=") else {
            throw SimulatorError(.invalidFault, "a fault is PREFIX=OUTCOME, for example 410=unregistered")
        }
        let prefix = text[..<equals]
        let name = text[text.index(after: equals)...]
        guard (1...64).contains(prefix.utf8.count), prefix.allSatisfy(\.isHexDigit) else {
            throw SimulatorError(.invalidFault, "a fault's prefix is 1 to 64 hex digits")
        }
        guard let outcome = Self.outcomes.first(where: { $0.name == name }) else {
            let names = Self.outcomes.map(\.name).joined(separator: ", ")
            throw SimulatorError(.invalidFault, "a fault's outcome is one of: \(names)")
        }
        self.init(prefix: String(prefix), fault: outcome.fault)
    }

    /// The fault of the longest prefix `token` starts with, if any.
    static func fault(for token: String, in faults: [TokenFault]) -> SimulatorFault? {
        guard !faults.isEmpty else { return nil }
        let lowered = token.lowercased()
        return faults.filter { lowered.hasPrefix($0.prefix) }.max { $0.prefix.count < $1.prefix.count }?.fault
    }
}
