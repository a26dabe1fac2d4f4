import APNsSimulator
import Dispatch
import Foundation
import Glibc
import RelayCore
import RelayCrypto
import RelayServer

/// The provider token forced to refresh under load (BENCHMARKS.md, "The provider token's refresh"): no push waits
/// for a signature, so the p99 of pushes at 1,000/s over a run in which APNs calls the provider token expired half way
/// is the p99 of the same run without it. For each kind of key (in a SoftHSM token; in the same token behind a module
/// that makes every signature 250 ms slower, as a network HSM or a cloud KMS can be; in a file), pairs of runs
/// alternate on fresh stacks (no refresh, refresh, no refresh, refresh), so that the machine's drift moves a pair
/// rather than one side. The relay runs one worker with one APNs connection: the simulator, like APNs, lets a
/// connection take a new token within 20 minutes only after it answered ExpiredProviderToken on it, so a second
/// connection would have its pushes refused (429 TooManyProviderTokenUpdates) once the new token is in force.
extension BenchRun {
    enum TokenKeyKind: String, CaseIterable {
        /// The APNs key in a SoftHSM token, signing through PKCS#11.
        case token
        /// The same token behind `scripts/slow-pkcs11.c`: every signature ``slowTokenDelayMilliseconds`` slower.
        case slowToken = "slow_token"
        /// The APNs key from a file, signing in memory.
        case file
    }

    /// The slow token's delay: long enough that a push loop stalled by one signature would hold more pushes than a
    /// run's slowest 1 % (at 1,000/s for 10 s, 100 of them).
    static let slowTokenDelayMilliseconds = 250

    func tokenRefresh() throws {
        let softHSM = try BenchSoftHSM.make(in: work + "/softhsm", keyFile: apns.apnsKey)
        let slowModule = work + "/slow-pkcs11.so"
        guard
            BenchChild.output(
                "clang", ["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", slowModule, "scripts/slow-pkcs11.c"])
                != nil
        else { throw LoadError(.failed, "scripts/slow-pkcs11.c did not build") }
        let signed = BenchChild.output(
            load,
            [
                "sign-time", "--module", BenchSoftHSM.module, "--uri", softHSM.uri, "--key", apns.apnsKey, "--count",
                "200",
            ], environment: softHSM.environment)
        appendResult("token-sign", signed ?? "")
        for kind in TokenKeyKind.allCases {
            relaySetup = { configuration, environment in
                switch kind {
                case .token:
                    configuration = try BenchTokenRefresh.oneConnection(configuration, module: BenchSoftHSM.module)
                    environment.merge(softHSM.relayEnvironment) { $1 }
                case .slowToken:
                    configuration = try BenchTokenRefresh.oneConnection(configuration, module: slowModule)
                    environment.merge(softHSM.relayEnvironment) { $1 }
                    environment["SLOW_PKCS11_MODULE"] = BenchSoftHSM.module
                    environment["SLOW_PKCS11_DELAY_MS"] = String(Self.slowTokenDelayMilliseconds)
                case .file:
                    configuration = try BenchTokenRefresh.oneConnection(configuration, module: nil)
                }
            }
            defer { relaySetup = nil }
            for _ in 1...plan.tokenRounds {
                for refresh in [false, true] {
                    try startStack()
                    let output = try tokenRun(refresh: refresh)
                    stopStack()
                    let tokens = BenchTokenRefresh.providerTokens(simulatorLog: Self.read(work + "/sim.log"))
                    appendResult(
                        refresh ? "token-refresh" : "token-steady",
                        BenchTokenRefresh.adding(
                            [
                                "key": JSONText.string(kind.rawValue),
                                "provider_tokens": tokens.map(String.init) ?? "null",
                            ],
                            to: output))
                }
            }
        }
        Self.log("the provider token's refresh measured (SoftHSM, slow SoftHSM and file keys)")
    }

    /// One open-loop run at the plan's token rate on the stack running now; with `refresh`, the simulator is told
    /// (SIGUSR1) half way through the measured seconds to answer the next push 403 ExpiredProviderToken.
    private func tokenRun(refresh: Bool) throws -> String {
        let file = work + "/token-load.json"
        let child = try BenchChild(
            load,
            openLoop(
                Double(plan.tokenRate), seconds: plan.tokenSeconds, warmup: plan.tokenWarmupSeconds,
                watching: ["relay": relayPID]), output: .file(file))
        if refresh {
            // The open loop's schedule starts 50 ms after it does, once its connections are open.
            usleep(UInt32((0.05 + plan.tokenWarmupSeconds + plan.tokenSeconds / 2) * 1e6))
            if child.isRunning { kill(simulatorPID, SIGUSR1) }
        }
        guard child.wait() == 0 else { return "" }
        return Self.read(file)
    }
}

/// The pieces of the provider-token runs that need no running server.
enum BenchTokenRefresh {
    /// The relay's configuration with one worker and one APNs connection, and `module` as `apns.pkcs11_module`.
    static func oneConnection(_ configuration: String, module: String?) throws -> String {
        guard var object = JSONText.object(Substring(configuration)),
            var apns = object["apns"] as? [String: Any], var server = object["server"] as? [String: Any]
        else { throw LoadError(.failed, "the relay's configuration has no apns or server block") }
        apns["max_connections"] = 1
        if let module { apns["pkcs11_module"] = module }
        server["threads"] = 1
        object["apns"] = apns
        object["server"] = server
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    /// On SIGUSR1, the next push is answered 403 ExpiredProviderToken (and a line says so in the simulator's log).
    static func expireOnSignal(_ simulator: APNsSimulator) -> any DispatchSourceSignal {
        signal(SIGUSR1, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGUSR1, queue: .global())
        source.setEventHandler {
            simulator.inject(.status(403, reason: "ExpiredProviderToken"), count: 1)
            LoadCommand.write("simulator: the next push is answered 403 ExpiredProviderToken")
        }
        source.resume()
        return source
    }

    /// The simulator's last line: what the provider-token runs check (one token, or two after a forced refresh).
    static func statisticsLine(_ statistics: SimulatorStatistics) -> String {
        #"{"provider_tokens":\#(statistics.distinctProviderTokens),"delivered":\#(statistics.delivered),"#
            + #""requests":\#(statistics.requests)}"#
    }

    /// The distinct provider tokens of the simulator's last statistics line in its log; nil without one.
    static func providerTokens(simulatorLog: String) -> Int? {
        for line in simulatorLog.split(separator: "\n").reversed() where line.hasPrefix(#"{"provider_tokens":"#) {
            return JSONText.object(line).flatMap { BenchReport.number($0, "provider_tokens") }.map { Int($0) }
        }
        return nil
    }

    /// `output`'s JSON object with `fields` (already JSON values) added first; an empty output stays empty.
    static func adding(_ fields: KeyValuePairs<String, String>, to output: String) -> String {
        let object = output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard object.hasPrefix("{"), object.count > 2 else { return "" }
        let members = fields.map { "\(JSONText.string($0.key)):\($0.value)" }.joined(separator: ",")
        return "{" + members + "," + object.dropFirst()
    }
}

/// A SoftHSM token for the provider-token runs (Debian's softhsm2, installed by `scripts/install-deps --test`): a
/// directory of its own under the run's, its configuration named by `SOFTHSM2_CONF`, a token holding the bench's APNs
/// key (imported with `softhsm2-util --import`, its public half beside it) and a random user PIN, which goes to the
/// relay in its environment and is never printed.
struct BenchSoftHSM {
    /// Debian's SoftHSM module.
    static let module = "/usr/lib/softhsm/libsofthsm2.so"
    static let label = "duo-relay-bench"
    let directory: String
    let pin: String

    var configuration: String { directory + "/softhsm2.conf" }
    var uri: String { "pkcs11:token=\(Self.label);object=apns" }
    /// What a process that opens the token needs: SoftHSM's configuration, and the PIN as the relay reads it.
    var environment: [String: String] { ["SOFTHSM2_CONF": configuration, "APNS_PKCS11_PIN": pin] }
    /// The relay's variables: the key's URI in place of its PEM text.
    var relayEnvironment: [String: String] { environment.merging(["APNS_KEY_SANDBOX": uri]) { $1 } }

    static func make(in directory: String, keyFile: String) throws -> BenchSoftHSM {
        guard FileManager.default.fileExists(atPath: module), BenchChild.find("softhsm2-util") != nil else {
            throw LoadError(.failed, "softhsm2 is not installed: run scripts/install-deps --test")
        }
        let token = BenchSoftHSM(directory: directory, pin: Hex.encode(SecureRandom.bytes(count: 8)))
        try FileManager.default.createDirectory(atPath: directory + "/tokens", withIntermediateDirectories: true)
        try """
        directories.tokendir = \(directory)/tokens
        objectstore.backend = file
        log.level = ERROR
        slots.removable = false

        """.write(toFile: token.configuration, atomically: true, encoding: .utf8)
        try token.util(["--init-token", "--free", "--label", label, "--pin", token.pin, "--so-pin", "so-" + token.pin])
        try token.util(["--import", keyFile, "--token", label, "--label", "apns", "--id", "01", "--pin", token.pin])
        return token
    }

    private func util(_ arguments: [String]) throws {
        guard
            BenchChild.output(
                "softhsm2-util", arguments, environment: ["SOFTHSM2_CONF": configuration], error: .discard) != nil
        else { throw LoadError(.failed, "softhsm2-util \(arguments[0]) failed") }
    }
}

/// `sign-time`: how long one provider token takes to sign with the key in a token (`--module`, `--uri`, the PIN from
/// `APNS_PKCS11_PIN`) and with the same key from a file (`--key`), `--count` times each, as the relay signs them (a
/// JWT over ES256); prints the median and the slowest of each, in milliseconds, as one JSON line.
enum SignTime {
    static func run(_ options: Arguments) throws {
        let count = try options.integer("count", default: 200)
        guard count > 0 else { throw LoadError(.usage, "--count must be positive") }
        guard let pin = ProcessInfo.processInfo.environment["APNS_PKCS11_PIN"] else {
            throw LoadError(.usage, "APNS_PKCS11_PIN is not set")
        }
        let uri: PKCS11URI
        do { uri = try PKCS11URI(parsing: try options.string("uri"), subject: "--uri") } catch {
            throw LoadError(.usage, "\(error)")
        }
        let signer: any ProviderTokenSigner
        switch TokenKeys.opener(try options.string("module"), uri, pin) {
        case .success(let opened): signer = opened
        case .failure(let failure): throw LoadError(.failed, "the token's key cannot be used: \(failure.reason)")
        }
        let key = try P256.Signing.PrivateKey(
            pemRepresentation: try String(contentsOfFile: try options.string("key"), encoding: .utf8))
        let inToken = ProviderCredentials(keyID: BenchSimulator.keyID, teamID: BenchSimulator.teamID, signer: signer)
        let inFile = ProviderCredentials(keyID: BenchSimulator.keyID, teamID: BenchSimulator.teamID, key: key)
        func times(_ credentials: ProviderCredentials) throws -> [UInt64] {
            try (0..<count).map { _ in
                let start = MonotonicClock.now()
                _ = try credentials.sign(issuedAt: UInt64(Date().timeIntervalSince1970))
                return MonotonicClock.now() - start
            }.sorted()
        }
        let token = try times(inToken)
        let file = try times(inFile)
        func milliseconds(_ nanoseconds: UInt64) -> String { String(format: "%.3f", Double(nanoseconds) / 1e6) }
        LoadCommand.write(
            #"{"count":\#(count),"token_p50_ms":\#(milliseconds(token[count / 2])),"#
                + #""token_max_ms":\#(milliseconds(token[count - 1])),"#
                + #""file_p50_ms":\#(milliseconds(file[count / 2])),"file_max_ms":\#(milliseconds(file[count - 1]))}"#)
    }
}
