import APNsSimulator
import Foundation
import Glibc
import RelayTestSupport
import Testing

/// `check` refuses whatever `serve` would refuse at start, and both say which configuration key is at fault, in
/// words, never with an internal type name.
@Suite struct CheckPredictsServeTests {
    let secrets = TestSecrets()
    let directory: URL

    init() throws {
        directory = try RelayProcess.temporaryDirectory()
    }

    /// Runs `command` (check or serve) on `config`; a serve that starts after all is stopped after a few seconds
    /// (and then exits 0).
    func run(_ command: String, _ config: String) throws -> CommandRun {
        let path = directory.appendingPathComponent("relay-\(UUID().uuidString).json").path
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        return try CommandRun.run([command, "--config", path], environment: secrets.environment, timeoutSeconds: 5)
    }

    static let internalNames = ["Error.", "Error(", "invalidConfiguration", "bindFailed", "startFailed", "Code("]

    func expectBothRefuse(_ config: String, naming subject: String, sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        for command in ["check", "serve"] {
            let result = try run(command, config)
            #expect(result.status == 1, "\(command): \(result.output)", sourceLocation: sourceLocation)
            let prefix = command == "check" ? "check failed: " : "duo-relay: "
            #expect(
                result.standardError.contains(prefix + subject + ": ")
                    || result.standardError.contains(
                        "duo-relay: cannot start: " + subject + ": "),
                "\(command): \(result.output)", sourceLocation: sourceLocation)
            for name in Self.internalNames {
                #expect(!result.output.contains(name), "\(command): \(result.output)", sourceLocation: sourceLocation)
            }
        }
    }

    @Test func aMissingCAFileIsRefusedByBoth() throws {
        try expectBothRefuse(
            RelayProcess.config(apns: #""ca_file":"\#(directory.path)/missing.pem""#), naming: "apns.ca_file")
    }

    @Test func aCAFileThatIsNotPEMIsRefusedByBoth() throws {
        let path = directory.appendingPathComponent("not-a-ca.pem").path
        try "not a certificate\n".write(toFile: path, atomically: true, encoding: .utf8)
        try expectBothRefuse(RelayProcess.config(apns: #""ca_file":"\#(path)""#), naming: "apns.ca_file")
    }

    /// An origin with an empty port (a template's unset variable) is the origin's fault, not the CA file's, though
    /// the CA file is set.
    @Test func anOriginWithAnEmptyPortIsBlamedOnTheOrigin() throws {
        let ca = directory.appendingPathComponent("ca.pem").path
        try SimulatorPKI.generate().caCertificatePEM.write(toFile: ca, atomically: true, encoding: .utf8)
        let config = RelayProcess.config(apns: #""sandbox_origin":"https://127.0.0.1:","ca_file":"\#(ca)""#)
        try expectBothRefuse(config, naming: "apns.sandbox_origin")
        for command in ["check", "serve"] {
            let result = try run(command, config)
            #expect(!result.output.contains("apns.ca_file"), "\(command): \(result.output)")
        }
    }

    /// The Redis store's CA file is loaded by `check` as by `serve` (neither needs the Redis to be up for this).
    @Test func aRedisCAFileMissingOrNotPEMIsRefusedByBoth() throws {
        let notPEM = directory.appendingPathComponent("not-a-redis-ca.pem").path
        try "not a certificate\n".write(toFile: notPEM, atomically: true, encoding: .utf8)
        for path in [directory.appendingPathComponent("missing.pem").path, notPEM] {
            let store = #""limits_store":{"kind":"redis","url":"rediss://127.0.0.1:9/0","ca_file":"\#(path)"}"#
            try expectBothRefuse(RelayProcess.config(extra: store), naming: "limits_store.ca_file")
        }
        // A real CA bundle passes, with no Redis at that address: `check` loads it and does not connect.
        let ca = directory.appendingPathComponent("redis-ca.pem").path
        try SimulatorPKI.generate().caCertificatePEM.write(toFile: ca, atomically: true, encoding: .utf8)
        let store = #""limits_store":{"kind":"redis","url":"rediss://127.0.0.1:9/0","ca_file":"\#(ca)"}"#
        let check = try run("check", RelayProcess.config(extra: store))
        #expect(check.status == 0, "\(check.output)")
    }

    /// A sentinel block that cannot work is refused by both, naming `limits_store`; a sound one passes `check`
    /// without a sentinel to ask, and its summary names the sentinel and the master.
    @Test func aBadSentinelBlockIsRefusedByBothAndAGoodOneIsSummarised() throws {
        let both =
            #""limits_store":{"kind":"redis","url":"redis://127.0.0.1:9/0","#
            + #""sentinel":{"master":"duo-limits","nodes":["127.0.0.1:9"]}}"#
        try expectBothRefuse(RelayProcess.config(extra: both), naming: "limits_store")
        let badNode = #""limits_store":{"kind":"redis","sentinel":{"master":"duo-limits","nodes":["127.0.0.1"]}}"#
        try expectBothRefuse(RelayProcess.config(extra: badNode), naming: "limits_store.sentinel.nodes")
        let good = #""limits_store":{"kind":"redis","sentinel":{"master":"duo-limits","nodes":["127.0.0.1:9"]}}"#
        let check = try run("check", RelayProcess.config(extra: good))
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.contains("limits store: redis through sentinel duo-limits (127.0.0.1:9)/0"))
    }

    /// The listen host is an address, never a name (no resolver decides where the relay listens).
    @Test(arguments: ["localhost:0", "relay.example:8787", "1.2.3:0", "[::1:0", "[fe80::1%eth0]:0"])
    func aListenHostThatIsNotAnAddressIsRefusedByBoth(_ listen: String) throws {
        try expectBothRefuse(#"{"listen":"\#(listen)","apns":{"topic":"app.openduo.pocket"}}"#, naming: "listen")
        try expectBothRefuse(
            #"{"listen":"127.0.0.1:0","metrics_listen":"\#(listen)","apns":{"topic":"app.openduo.pocket"}}"#,
            naming: "metrics_listen")
    }

    @Test func metricsOnTheListenAddressIsRefusedByBoth() throws {
        let port = try freePort()
        for metrics in ["127.0.0.1:\(port)", "0.0.0.0:\(port)"] {
            try expectBothRefuse(
                #"{"listen":"127.0.0.1:\#(port)","metrics_listen":"\#(metrics)","apns":{"topic":"app.openduo.pocket"}}"#,
                naming: "metrics_listen")
        }
    }

    /// A port already taken is found only by serve (check runs beside the running relay, whose port is taken):
    /// serve names the key, in words.
    @Test func serveNamesTheKeyOfAPortInUse() throws {
        let listener = try SilentListener()
        let result = try run(
            "serve", #"{"listen":"127.0.0.1:\#(listener.port)","apns":{"topic":"app.openduo.pocket"}}"#)
        #expect(result.status == 1)
        #expect(result.standardError.contains("duo-relay: cannot start: listen: "), "\(result.output)")
        for name in Self.internalNames { #expect(!result.output.contains(name), "\(result.output)") }
        let metrics = try run(
            "serve",
            #"{"listen":"127.0.0.1:0","metrics_listen":"127.0.0.1:\#(listener.port)","apns":{"topic":"app.openduo.pocket"}}"#
        )
        #expect(metrics.status == 1)
        #expect(metrics.standardError.contains("duo-relay: cannot start: metrics_listen: "), "\(metrics.output)")
    }

    @Test func whatServeAcceptsCheckAccepts() throws {
        let config = #"{"listen":"[::1]:0","metrics_listen":"127.0.0.1:0","apns":{"topic":"app.openduo.pocket"}}"#
        #expect(try run("check", config).status == 0)
        let serve = try RelayProcess(config: config, secrets: secrets)
        #expect(serve.standardError.contains("listening on [::1]:"), "\(serve.standardError)")
    }
}
