import RelayCore

/// What the relay serves with at one moment: configuration, secrets and a gateway per
/// configured APNs environment. Replaced whole, never mutated in place.
struct RelayState: Sendable {
    let configuration: RelayConfiguration
    let secrets: RelaySecrets
    let gateways: [APNsEnvironment: APNsGateway]
}
