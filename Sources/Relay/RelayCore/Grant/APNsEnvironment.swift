/// The two APNs environments. The raw value is the byte stored in a grant.
public enum APNsEnvironment: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case sandbox = 0
    case production = 1

    /// Parses the request and configuration spelling: "sandbox" or "production".
    public init?(name: some StringProtocol) {
        switch name {
        case "sandbox": self = .sandbox
        case "production": self = .production
        default: return nil
        }
    }

    public var name: String {
        switch self {
        case .sandbox: "sandbox"
        case .production: "production"
        }
    }

    public var description: String { name }

    /// The suffix of the environment's secret variables (`APNS_KEY_SANDBOX`, ...).
    public var variableSuffix: String { name.uppercased() }
}
