import Foundation

extension DocTestRun {
    /// docs/operations/hardware-keys.md's SoftHSM example, both blocks in one shell as an operator runs them: a token
    /// made, the simulator's APNs key imported and its .p8 deleted, the relay given the key's URI, the library and the
    /// PIN; `check` signs in the token, and a push is delivered (the simulator verifies the token's signature). The PIN
    /// is in none of the relay's output.
    func hardwareKeys() throws {
        scenario = "hardware-keys"
        say("hardware-keys: \(location(1)), then \(location(2))")
        let directory = work + "/hardware-keys"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // A token left by an earlier run would be a second token with the same label.
        try? FileManager.default.removeItem(atPath: "/var/lib/duo-relay-softhsm")
        try FileManager.default.copyItem(
            atPath: apns + "/AuthKey_KEYID12345.p8", toPath: directory + "/AuthKey_KEYID12345.p8")
        let configuration = directory + "/relay.json"
        try FileManager.default.copyItem(atPath: repo + "/deploy/systemd/relay.json", toPath: configuration)
        try pointAtSimulator(configuration)
        // Ports of its own (the other scenarios' relays still run).
        try editJSON(configuration, #".listen = "127.0.0.1:8785" | .metrics_listen = "127.0.0.1:9785""#)
        let pin = Self.randomHex(8)
        var environment = secretsEnvironment(relayKeys: try keygen())
        environment["APNS_KEY_PRODUCTION"] = nil
        environment["APNS_PKCS11_PIN"] = pin
        environment["SO_PIN"] = Self.randomHex(8)
        let output = directory + "/relay.out"
        _ = try RecipeProcess(
            "/bin/bash", ["-euo", "pipefail", "-c", #". "$1"; . "$2""#, "bash", try block(1), try block(2)],
            directory: directory, environment: environment, output: .file(output), error: .output)
        guard waitHTTP(8785, "/healthz") else {
            show([output, directory + "/relay.log"], last: 5)
            throw fail("the relay never answered")
        }
        let printed = read(output)
        guard printed.contains("Access:     sensitive"), !printed.contains("extractable") else {
            throw fail("pkcs11-tool does not list a sensitive, non-extractable key")
        }
        guard !FileManager.default.fileExists(atPath: directory + "/AuthKey_KEYID12345.p8") else {
            throw fail("the .p8 is still there")
        }
        guard DocTestReadings.hasLine(printed, startingWith: "check: ok") else { throw fail("check did not pass") }
        guard printed.contains("in the token at pkcs11:token=duo-relay;object=apns-production") else {
            throw fail("check's summary does not name the key's URI")
        }
        let grant = try self.grant(8785)
        try pushDelivered(8785, grant, else: "a push signed in the token")
        guard !(printed + read(directory + "/relay.log")).contains(pin) else { throw fail("the PIN was printed") }
        // /var is not one of the run's throwaway overlays: the token's files go with the scenario.
        try? FileManager.default.removeItem(atPath: "/var/lib/duo-relay-softhsm")
        say(
            "hardware-keys: a SoftHSM token made, the key imported and the .p8 deleted; check signs there; a push delivered"
        )
    }
}
