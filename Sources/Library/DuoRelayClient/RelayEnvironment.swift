/// The APNs environment a phone's token belongs to: `sandbox` for development builds of the app,
/// `production` for App Store and TestFlight builds.
public struct RelayEnvironment: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let sandbox = RelayEnvironment(rawValue: "sandbox")
    public static let production = RelayEnvironment(rawValue: "production")
}
