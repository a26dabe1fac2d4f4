import APNsSimulator
import Foundation
import RelayCrypto
import Testing

@Suite("Connections, TLS and lifecycle")
struct ConnectionTests {
    private func nghttpVerbose(_ fixture: SimulatorFixture, token: String) async throws -> String {
        let payloadFile = try fixture.writeFile("payload-\(UUID().uuidString)", SimulatorFixture.payload)
        var arguments = ["-v", "-t", "10", "-d", payloadFile]
        for header in fixture.headers(token: token) { arguments += ["-H", header] }
        arguments.append(fixture.url())
        return try await fixture.run("/usr/bin/nghttp", arguments).stdout
    }

    @Test("one stream is advertised until a valid token, then maxConcurrentStreams")
    func concurrentStreamsAfterValidToken() async throws {
        let fixture = try SimulatorFixture(maxConcurrentStreams: 7)
        let output = try await nghttpVerbose(fixture, token: try fixture.providerToken())
        #expect(output.contains("[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):1]"))
        #expect(output.contains("[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):7]"))
        #expect(output.contains(":status: 200"))
    }

    @Test("a connection with only invalid tokens keeps one stream")
    func oneStreamWithoutValidToken() async throws {
        let fixture = try SimulatorFixture(maxConcurrentStreams: 7)
        let output = try await nghttpVerbose(fixture, token: try fixture.providerToken(keyID: "UNKNOWN123"))
        #expect(output.contains("[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):1]"))
        #expect(!output.contains("[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):7]"))
        #expect(output.contains(":status: 403"))
    }

    @Test("concurrent streams on one connection are counted")
    func concurrentStreamsSeen() async throws {
        let fixture = try SimulatorFixture()
        fixture.simulator.setDefaultFault(.delay(.milliseconds(300)))
        let payloadFile = try fixture.writeFile("payload.json", SimulatorFixture.payload)
        var arguments = ["-n", "12", "-c", "1", "-m", "4", "-d", payloadFile]
        for header in fixture.headers(token: try fixture.providerToken()) { arguments += ["-H", header] }
        arguments.append(fixture.url())
        // The first burst may be refused above one stream; later requests run four at a time.
        _ = try await fixture.run("/usr/bin/h2load", arguments)
        let statistics = fixture.simulator.statistics
        #expect(statistics.maxConcurrentStreamsSeen == 4)
        #expect(statistics.connectionsAccepted == 1)
    }

    @Test("clients that do not offer h2 fail the TLS handshake")
    func http1Refused() async throws {
        let fixture = try SimulatorFixture()
        let result = try await fixture.run(
            "/usr/bin/curl", ["-sS", "--http1.1", "--cacert", fixture.caFile, "--max-time", "10", fixture.url()])
        #expect(result.exitCode == 35)  // CURLE_SSL_CONNECT_ERROR
        #expect(fixture.simulator.statistics.requests == 0)
    }

    @Test("the certificate verifies for localhost and 127.0.0.1 against the generated CA")
    func certificateNames() async throws {
        let fixture = try SimulatorFixture()
        let token = try fixture.providerToken()
        let byName = try await fixture.curl(
            "https://localhost:\(fixture.simulator.port)/3/device/\(SimulatorFixture.deviceToken)",
            headers: fixture.headers(token: token))
        #expect(byName.status == 200)
        let byAddress = try await fixture.curl(headers: fixture.headers(token: token))
        #expect(byAddress.status == 200)
        // Without the CA, curl refuses the certificate.
        let untrusted = try await fixture.run("/usr/bin/curl", ["-sS", "--http2", "--max-time", "10", fixture.url()])
        #expect(untrusted.exitCode == 60)  // CURLE_PEER_FAILED_VERIFICATION
    }

    @Test("SimulatorPKI: CA:TRUE on the CA, SANs on the leaf, validity around now, P-256 keys")
    func pki() async throws {
        let pki = try SimulatorPKI.generate(hosts: ["localhost", "127.0.0.1", "::1", "apns.test"])
        let fixture = try SimulatorFixture()
        let ca = try fixture.writeFile("pki-ca.pem", pki.caCertificatePEM)
        let leaf = try fixture.writeFile("pki-leaf.pem", pki.certificatePEM)
        let key = try fixture.writeFile("pki-key.pem", pki.privateKeyPEM)
        let verify = try await fixture.run("/usr/bin/openssl", ["verify", "-CAfile", ca, leaf])
        #expect(verify.exitCode == 0)
        let caText = try await fixture.run("/usr/bin/openssl", ["x509", "-in", ca, "-noout", "-text"]).stdout
        #expect(caText.contains("CA:TRUE"))
        let leafText = try await fixture.run("/usr/bin/openssl", ["x509", "-in", leaf, "-noout", "-text"]).stdout
        #expect(leafText.contains("DNS:localhost"))
        #expect(leafText.contains("DNS:apns.test"))
        #expect(leafText.contains("IP Address:127.0.0.1"))
        #expect(leafText.contains("IP Address:0:0:0:0:0:0:0:1"))
        #expect(leafText.contains("CA:FALSE"))
        #expect(leafText.contains("prime256v1"))
        let dates = try await fixture.run("/usr/bin/openssl", ["x509", "-in", leaf, "-noout", "-checkend", "0"])
        #expect(dates.exitCode == 0)
        let notYetExpiring = try await fixture.run(
            "/usr/bin/openssl", ["x509", "-in", leaf, "-noout", "-checkend", String(29 * 86_400)])
        #expect(notYetExpiring.exitCode == 0)
        let tooLong = try await fixture.run(
            "/usr/bin/openssl", ["x509", "-in", leaf, "-noout", "-checkend", String(31 * 86_400)])
        #expect(tooLong.exitCode != 0)
        let keyCheck = try await fixture.run("/usr/bin/openssl", ["pkey", "-in", key, "-noout", "-text"])
        #expect(keyCheck.stdout.contains("prime256v1") || keyCheck.stdout.contains("P-256"))
    }

    @Test("the simulator serves on IPv6 loopback")
    func ipv6() async throws {
        let pki = try SimulatorPKI.generate()
        let key = P256.Signing.PrivateKey()
        var configuration = SimulatorConfiguration(
            certificatePEM: pki.certificatePEM, privateKeyPEM: pki.privateKeyPEM, teamID: SimulatorFixture.teamID,
            keys: [SimulatorFixture.keyID: key.publicKey], topics: [SimulatorFixture.topic])
        configuration.host = "::1"
        let simulator = try APNsSimulator(configuration: configuration)
        defer { simulator.stop() }
        let fixture = try SimulatorFixture()
        let ca = try fixture.writeFile("v6-ca.pem", pki.caCertificatePEM)
        let token = try fixture.providerToken(key: key)
        var arguments = ["-sS", "--http2", "--cacert", ca, "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10"]
        for header in fixture.headers(token: token) { arguments += ["-H", header] }
        arguments += [
            "--data-binary", SimulatorFixture.payload,
            "https://[::1]:\(simulator.port)/3/device/\(SimulatorFixture.deviceToken)",
        ]
        let result = try await fixture.run("/usr/bin/curl", arguments)
        #expect(result.stdout == "200")
        #expect(simulator.delivered.count == 1)
    }

    @Test("stop closes the port; stopping twice is harmless")
    func stop() async throws {
        let fixture = try SimulatorFixture()
        let token = try fixture.providerToken()
        #expect(try await fixture.curl(headers: fixture.headers(token: token)).status == 200)
        fixture.simulator.stop()
        fixture.simulator.stop()
        let after = try await fixture.curl(headers: fixture.headers(token: token))
        #expect(after.exitCode == 7)  // CURLE_COULDNT_CONNECT
        #expect(fixture.simulator.delivered.count == 1)
    }

    @Test("a certificate that does not parse, or a key that does not match, is refused at start")
    func badCertificate() throws {
        let pki = try SimulatorPKI.generate()
        let other = try SimulatorPKI.generate()
        let key = P256.Signing.PrivateKey()
        for (certificate, privateKey) in [("not a pem", pki.privateKeyPEM), (pki.certificatePEM, other.privateKeyPEM)] {
            let configuration = SimulatorConfiguration(
                certificatePEM: certificate, privateKeyPEM: privateKey, teamID: SimulatorFixture.teamID,
                keys: [SimulatorFixture.keyID: key.publicKey], topics: [SimulatorFixture.topic])
            #expect(throws: SimulatorError(.invalidCertificate, "")) { try APNsSimulator(configuration: configuration) }
        }
    }

    @Test("a port in use is reported")
    func portInUse() throws {
        let fixture = try SimulatorFixture()
        let pki = try SimulatorPKI.generate()
        var configuration = SimulatorConfiguration(
            certificatePEM: pki.certificatePEM, privateKeyPEM: pki.privateKeyPEM, teamID: SimulatorFixture.teamID,
            keys: [:], topics: [])
        configuration.port = fixture.simulator.port
        #expect(throws: SimulatorError(.bindFailed, "")) { try APNsSimulator(configuration: configuration) }
    }
}
