import RelayCore

/// What the relay serves with at one moment: configuration, secrets and a gateway per
/// configured APNs environment. Replaced whole, never mutated in place: a class, so that taking the
/// current state (on every request) costs one reference, not a copy of every field.
final class RelayState: Sendable {
    let configuration: RelayConfiguration
    let secrets: RelaySecrets
    let gateways: [APNsEnvironment: APNsGateway]

    init(configuration: RelayConfiguration, secrets: RelaySecrets, gateways: [APNsEnvironment: APNsGateway]) {
        self.configuration = configuration
        self.secrets = secrets
        self.gateways = gateways
    }
}
