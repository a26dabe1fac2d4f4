import DuoRelayClient
import Foundation
import Glibc

/// `doc-test --repo DIR --work DIR`: runs the command blocks of README.md and the operations documents as written, with
/// throwaway secrets, and checks what an operator sees (scripts/doc-test runs it inside private namespaces, with
/// /etc, /usr/local and $HOME as overlays, the checkout too, and `systemctl` the stand-in). Each scenario runs its
/// blocks with bash in the order the documents give; APNs is `duo-relay apns-sim` on 127.0.0.1:8443, and the
/// relay.json a scenario uses is pointed at it (the only edit made to a documented file). Then every block of every
/// local scenario must have run. A failed check prints one line, `doc-test: FAIL: SCENARIO: WHAT`, and exits 1.
/// Grants, tokens and keys stay in memory and in the run's files; none is printed.
final class DocTestRun: RecipeRun {
    static let program = "doc-test"

    let repo: String
    let work: String
    let home: String
    let blocks: [RecipeBlock]
    /// The blocks run so far, by `NAME.N`.
    var ran: Set<String> = []
    /// The scenario running, named by its failures.
    var scenario = "doc-test"
    let apns: String
    /// The systemctl stand-in's state: its journal, credentials and the service's PID.
    let systemd: String

    /// The scenarios named on the command line (`scripts/doc-test NAME...`); nil: every one.
    let only: Set<String>?

    init(repo: String, work: String, only: Set<String>? = nil) throws {
        self.repo = repo
        self.work = work
        self.only = only
        home = ProcessInfo.processInfo.environment["HOME"] ?? work + "/home"
        apns = work + "/apns"
        systemd = work + "/systemd"
        do {
            blocks = try RecipeExtract.blocks(of: RecipeExtract.documents(in: repo), in: repo)
        } catch {
            RecipeExtract.failExtract(error)
            throw error
        }
        // Every block's file, as `scripts/doc-test --extract` writes them: to read what ran after a failure.
        try RecipeExtract.write(blocks, to: work + "/blocks")
        setenv("DOC_TEST_SYSTEMD", systemd, 1)
    }

    static func main(_ arguments: [String]) -> Int32 {
        var repo: String?
        var work: String?
        var only: Set<String>?
        var rest = arguments[...]
        while let option = rest.popFirst() {
            switch option {
            case "--repo": repo = rest.popFirst()
            case "--work": work = rest.popFirst()
            case "--only": only = rest.popFirst().map { Set($0.split(separator: ",").map(String.init)) }
            default: repo = nil; work = nil; rest = []
            }
        }
        guard let repo, let work, only.map({ $0.isSubset(of: RecipeScenarios.local) }) != false else {
            printError(
                "usage: duo-relay-recipes doc-test --repo CHECKOUT --work DIRECTORY [--only SCENARIO,...] (scenarios: "
                    + RecipeScenarios.local.joined(separator: ", ") + ")")
            return 2
        }
        do {
            let run = try DocTestRun(repo: repo, work: work, only: only)
            try run.runAll()
            return 0
        } catch let failure as RecipeFailure {
            printError(failure.docTestLine)
        } catch is RecipeError {
            // Already printed, with each unmarked block's line.
        } catch {
            printError("doc-test: FAIL: \(error)")
        }
        return 1
    }

    func runAll() throws {
        scenario = "apns-sim"
        // In RecipeScenarios.local's order, after the simulator every one needs; restarts and tls-certbot go on with
        // the service the systemd scenario installed.
        let steps: [(String, () throws -> Void)] = [
            ("apns-sim", startSimulator), ("quick-start", quickStart), ("secrets-env", secretsEnv),
            ("systemd", systemdScenario),
            ("redis-pair", redisPair), ("redis-sentinel", redisSentinel), ("egress-proxy", egressProxy),
            ("hardware-keys", hardwareKeys), ("restarts", restarts), ("tls-certbot", tlsCertbot),
        ]
        for (name, step) in steps where name == "apns-sim" || only?.contains(name) ?? true {
            do {
                try step()
            } catch let failure as RecipeFailure {
                throw failure
            } catch {
                // A file the scenario could not copy or write: named with the scenario too.
                throw fail("\(error)")
            }
        }
        scenario = "doc-test"
        if let only {
            say("only \(only.sorted().joined(separator: ", ")) run: the check that every block runs is left out")
            return
        }
        if let block = RecipeBlocks.firstNotRun(blocks, ran: ran) {
            throw RecipeFailure(
                scenario: block.scenario, what: "block \(block.number) (\(block.location)) is never run")
        }
        say("every command block of README.md and the operations documents is run here or by scripts/container-test")
    }

    // MARK: - The scenarios' tools

    func fail(_ what: String) -> RecipeFailure { RecipeFailure(scenario: scenario, what: what) }

    /// The scenario's block `number`, as a file; recorded as run.
    func block(_ number: Int) throws -> String {
        guard blocks.contains(where: { $0.scenario == scenario && $0.number == number }) else {
            throw fail("the documents have no block \(number) for this scenario (marks moved?)")
        }
        ran.insert("\(scenario).\(number)")
        return "\(work)/blocks/\(scenario).\(number).sh"
    }

    /// Where the scenario's block `number` is (`OPERATIONS.md:29`).
    func location(_ number: Int) -> String {
        blocks.first { $0.scenario == scenario && $0.number == number }?.location ?? "?"
    }

    /// The last `count` lines of each file, to standard error (what went wrong, before the FAIL line).
    func show(_ paths: [String], last count: Int? = nil) {
        for path in paths {
            let lines = read(path).split(separator: "\n", omittingEmptySubsequences: false)
            let shown = count.map { Array(lines.dropLast(lines.last == "" ? 1 : 0).suffix($0)) } ?? Array(lines)
            printError(shown.joined(separator: "\n"))
        }
    }

    /// Whether 127.0.0.1:`port` answers `path` 200 within `seconds`.
    func waitHTTP(_ port: Int, _ path: String, seconds: Double = 30) -> Bool {
        RecipeHTTP.answers200(port: port, path: path, within: seconds)
    }

    /// Whether `file` holds `text` within `seconds`, while `child` (if any) runs.
    func waitFile(_ file: String, _ text: String, seconds: Double, while child: RecipeProcess? = nil) -> Bool {
        var ended = false
        return RecipeClock.within(seconds) {
            if read(file).contains(text) { return true }
            ended = child.map { !$0.isRunning } ?? false
            return ended
        } && !ended
    }

    /// Whether the relay at 127.0.0.1:`port` (its metrics listener) says on /readyz that it counts in Redis.
    func limitsShared(_ port: Int) -> Bool {
        RecipeHTTP.request("GET", port: port, path: "/readyz", seconds: 5).map {
            DocTestReadings.limitsShared($0.body)
        } ?? false
    }

    /// A grant for a fresh token from the relay at 127.0.0.1:`port`, asked as if from `address`.
    func grant(_ port: Int, from address: String = "192.0.2.1") throws -> String {
        let body = #"{"token":""# + Self.randomHex(32) + #"","environment":"production"}"#
        let answer = RecipeHTTP.request(
            "POST", port: port, path: "/v1/grant",
            headers: [("Content-Type", "application/json"), ("X-Forwarded-For", address)], body: Array(body.utf8),
            seconds: 10)
        guard let answer,
            let grant = RelayAnswer(status: answer.status, retryAfter: nil, body: Data(answer.body)).strings["grant"]
        else { throw fail("no grant from the relay on port \(port)") }
        return grant
    }

    /// The HTTP status of one push with `grant` through the relay at 127.0.0.1:`port`, as if from `address` (0 if
    /// none came).
    func pushStatus(_ port: Int, _ grant: String, from address: String = "192.0.2.1") -> Int {
        Self.pushStatus(port, grant, from: address)
    }

    /// ``pushStatus(_:_:from:)`` from any thread.
    static func pushStatus(_ port: Int, _ grant: String, from address: String) -> Int {
        var generator = SystemRandomNumberGenerator()
        let sealed = Data((0..<RelayPush.sealedByteCount).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let push = RelayPush(sealed: sealed, id: randomHex(32), thread: randomHex(32))
        let answer = RecipeHTTP.request(
            "POST", port: port, path: "/v1/push",
            headers: [("Content-Type", "application/json"), ("X-Forwarded-For", address)],
            body: Array(push.body(grant: grant)), seconds: 20)
        return answer?.status ?? 0
    }

    /// One push with `grant` through the relay at 127.0.0.1:`port`, answered 200 (else `failure`) and delivered.
    func pushDelivered(_ port: Int, _ grant: String, else failure: String) throws {
        let before = deliveries()
        guard pushStatus(port, grant) == 200 else { throw fail(failure) }
        guard deliveries() == before + 1 else { throw fail("the push did not reach APNs") }
    }

    /// The pushes the simulator has delivered so far.
    func deliveries() -> Int { read(apns + "/deliveries.jsonl").split(separator: "\n").count }

    /// Throwaway APNs secrets and a CA, and the simulator on 127.0.0.1:8443 that accepts them.
    func startSimulator() throws {
        try FileManager.default.createDirectory(atPath: apns, withIntermediateDirectories: true)
        let steps: [[String]] = [
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "AuthKey_KEYID12345.p8"],
            ["pkey", "-in", "AuthKey_KEYID12345.p8", "-pubout", "-out", "public.pem"],
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj",
                "/CN=doc-test CA", "-keyout", "ca.key", "-out", "ca.pem",
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1",
                "-keyout", "sim.key", "-out", "sim.csr",
            ],
            [
                "x509", "-req", "-in", "sim.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
                "-extfile", "sim.ext", "-out", "sim.pem",
            ],
        ]
        try "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n".write(
            toFile: apns + "/sim.ext", atomically: true, encoding: .utf8)
        for step in steps {
            guard
                (try? RecipeProcess.run("openssl", step, directory: apns, output: .discard, error: .discard))?.status
                    == 0
            else {
                throw fail("openssl \(step[0]) failed")
            }
        }
        chmod(apns + "/ca.pem", 0o644)
        guard FileManager.default.createFile(atPath: apns + "/deliveries.jsonl", contents: nil) else {
            throw fail("cannot write \(apns)/deliveries.jsonl")
        }
        let simulator = try RecipeProcess(
            repo + "/.build/release/duo-relay",
            [
                "apns-sim", "--listen", "127.0.0.1:8443", "--team-id", "ABCDE12345", "--key-id", "KEYID12345",
                "--public-key", apns + "/public.pem", "--cert", apns + "/sim.pem", "--private-key", apns + "/sim.key",
                "--record", apns + "/deliveries.jsonl",
            ], output: .file(apns + "/sim.out"), error: .file(apns + "/sim.err"))
        guard waitFile(apns + "/sim.err", "listening on", seconds: 30, while: simulator) else {
            let last = read(apns + "/sim.err").split(separator: "\n").last ?? ""
            throw fail("did not start: \(last)")
        }
    }

    /// Points the relay.json at `path` at the simulator: its production origin and the CA that signed its
    /// certificate (with jq, so that the rest of the file stays as written).
    func pointAtSimulator(_ path: String) throws {
        try editJSON(
            path, ".apns.production_origin = \"https://127.0.0.1:8443\" | .apns.ca_file = $ca",
            ["--arg", "ca", apns + "/ca.pem"])
        chmod(path, 0o644)
    }

    /// Rewrites the JSON file at `path` with the jq `filter`.
    func editJSON(_ path: String, _ filter: String, _ arguments: [String] = []) throws {
        let edited = try RecipeProcess.run("jq", arguments + [filter, path], error: .inherited)
        guard edited.status == 0 else { throw fail("jq could not edit \(path): \(edited.output)") }
        try edited.output.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// The environment of a shell in which README's Secrets block ran: RELAY_KEYS, the APNs ids and the key, and
    /// the installed duo-relay first on PATH.
    func secretsEnvironment(relayKeys: String) -> [String: String] {
        [
            "RELAY_KEYS": relayKeys, "APNS_TEAM_ID": "ABCDE12345", "APNS_KEY_ID_PRODUCTION": "KEYID12345",
            "APNS_KEY_PRODUCTION": trimmed(read(apns + "/AuthKey_KEYID12345.p8")), "PATH": installedPath,
        ]
    }

    var installedPath: String { home + "/.local/bin:" + (ProcessInfo.processInfo.environment["PATH"] ?? "") }

    /// Relay keys from the installed `duo-relay keygen --id 1`.
    func keygen() throws -> String {
        let keys = try RecipeProcess.run(home + "/.local/bin/duo-relay", ["keygen", "--id", "1"], error: .inherited)
        guard keys.status == 0 else { throw fail("duo-relay keygen failed") }
        return trimmed(keys.output)
    }

    /// Text without its trailing newlines, as `$(...)` gives it.
    func trimmed(_ text: String) -> String { String(text.reversed().drop { $0 == "\n" }.reversed()) }
}
