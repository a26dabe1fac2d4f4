import RelayCore
import RelayCrypto
import Testing

/// An APNs key and its id change together or not at all (docs/DESIGN.md, "Lifecycle").
@Suite struct APNsKeyChangeTests {
    let key = P256.Signing.PrivateKey()
    let otherKey = P256.Signing.PrivateKey()

    func credentials(_ id: String, _ key: P256.Signing.PrivateKey) -> ProviderCredentials {
        ProviderCredentials(keyID: id, teamID: "TEAM000001", key: key)
    }

    @Test func keyAndIdTogetherOrNeitherPass() {
        let running = credentials("KEYID00001", key)
        #expect(APNsKeyChange.problem(running: running, new: running, environment: .sandbox) == nil)
        #expect(
            APNsKeyChange.problem(running: running, new: credentials("KEYID00002", otherKey), environment: .sandbox)
                == nil)
    }

    @Test func aNewKeyUnderTheRunningIdIsRefusedNamingTheEnvironment() throws {
        let problem = try #require(
            APNsKeyChange.problem(
                running: credentials("KEYID00001", key), new: credentials("KEYID00001", otherKey),
                environment: .production))
        #expect(problem.subject == "APNS_KEY_PRODUCTION")
        #expect(problem.reason.hasPrefix("production: a new key under the running key id KEYID00001"))
        #expect(problem.reason.contains("set APNS_KEY_ID_PRODUCTION to the new key's id"))
        for secret in [key.pemRepresentation, otherKey.pemRepresentation] {
            #expect(!problem.description.contains(secret))
        }
    }

    @Test func theRunningKeyUnderANewIdIsRefusedNamingTheEnvironment() throws {
        let problem = try #require(
            APNsKeyChange.problem(
                running: credentials("KEYID00001", key), new: credentials("KEYID00002", key), environment: .sandbox))
        #expect(problem.subject == "APNS_KEY_ID_SANDBOX")
        #expect(problem.reason.hasPrefix("sandbox: a new key id KEYID00002 with the running key (id KEYID00001)"))
        #expect(problem.reason.contains("replace APNS_KEY_SANDBOX"))
    }
}
