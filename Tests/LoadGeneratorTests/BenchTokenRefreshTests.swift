import Foundation
import Testing

@testable import LoadGenerator

/// The provider-token runs of the benchmark, without a server: what each mode measures, the relay's configuration for
/// them, what is read back from the simulator, and the figures (null when a run did not do what it was meant to).
@Suite("The benchmark's provider-token runs")
struct BenchTokenRefreshTests {
    private func step(_ name: String, _ json: String) throws -> BenchReport.Step {
        BenchReport.Step(name: name, data: try #require(JSONText.object(Substring(json))))
    }

    private func value(_ figures: [BenchReport.Figure], _ key: String) -> Double? {
        figures.first { $0.key == key }?.value
    }

    @Test("--token runs only the provider-token pairs; the full and smoke runs include them, --cpu and --redis not")
    func modes() throws {
        let token = BenchPlan(mode: .token)
        #expect(token.measuresTokenRefresh)
        #expect(!token.measuresSaturation && !token.measuresServing && !token.measuresAnchor && !token.measuresRedis)
        #expect(token.tokenRounds == 2 && token.tokenRate == 1000 && token.tokenSeconds == 10)
        #expect(BenchPlan(mode: .full).measuresTokenRefresh)
        let smoke = BenchPlan(mode: .smoke)
        #expect(smoke.measuresTokenRefresh && smoke.tokenRounds == 1 && smoke.tokenSeconds == 1)
        #expect(!BenchPlan(mode: .cpu).measuresTokenRefresh && !BenchPlan(mode: .redis).measuresTokenRefresh)
        let options = try BenchRun.Options(Arguments(["--mode", "token", "--relay-bin", "r"]))
        #expect(options.plan.mode == .token)
    }

    @Test("the relay for the provider-token runs: one worker, one APNs connection, the module for a token's key")
    func oneConnection() throws {
        let base = BenchFiles.relayConfiguration(simulatorPort: 4433, caFile: "/ca.pem", storePort: nil, threads: 2)
        let token = try #require(
            JSONText.object(Substring(try BenchTokenRefresh.oneConnection(base, module: BenchSoftHSM.module))))
        #expect(BenchReport.number(token, "server", "threads") == 1)
        #expect(BenchReport.number(token, "apns", "max_connections") == 1)
        #expect((token["apns"] as? [String: Any])?["pkcs11_module"] as? String == "/usr/lib/softhsm/libsofthsm2.so")
        // The rest as every run has it.
        #expect(BenchReport.number(token, "ip_limit", "requests") == 1_000_000)
        #expect((token["apns"] as? [String: Any])?["sandbox_origin"] as? String == "https://127.0.0.1:4433")
        let file = try #require(JSONText.object(Substring(try BenchTokenRefresh.oneConnection(base, module: nil))))
        #expect((file["apns"] as? [String: Any])?["pkcs11_module"] == nil)
        #expect(BenchReport.number(file, "apns", "max_connections") == 1)
        #expect(throws: LoadError(.failed, "")) { try BenchTokenRefresh.oneConnection("{}", module: nil) }
    }

    @Test("the simulator's last statistics line, and fields added to a run's JSON")
    func readings() {
        let log = """
            simulator: the next push is answered 403 ExpiredProviderToken
            {"provider_tokens":2,"delivered":15000,"requests":15001}

            """
        #expect(BenchTokenRefresh.providerTokens(simulatorLog: log) == 2)
        #expect(BenchTokenRefresh.providerTokens(simulatorLog: "killed\n") == nil)
        let line = BenchTokenRefresh.statisticsLine(.init())
        #expect(BenchTokenRefresh.providerTokens(simulatorLog: line) == 0)
        #expect(
            BenchTokenRefresh.adding(["key": "\"token\"", "provider_tokens": "1"], to: "{\"p99_ms\":0.5}\n")
                == #"{"key":"token","provider_tokens":1,"p99_ms":0.5}"#)
        #expect(BenchTokenRefresh.adding(["key": "\"file\""], to: "") == "")
    }

    /// A provider-token run: `scheduled` pushes, `ok` of them answered 200 (the rest 502).
    private func run(
        _ key: String, refresh: Bool, p99: Double, max: Double = 5, tokens: Int, ok: Int = 15000
    ) throws -> BenchReport.Step {
        try step(
            refresh ? "token-refresh" : "token-steady",
            #"{"key":"\#(key)","provider_tokens":\#(tokens),"rate":1000,"scheduled":15000,"p99_ms":\#(p99),"#
                + #""p999_ms":1.5,"max_ms":\#(max),"statuses":{"200":\#(ok),"502":\#(15000 - ok)}}"#)
    }

    @Test("each key's p99 without and with the refresh, medians over the runs, and their ratio")
    func figures() throws {
        let report = BenchReport(steps: [
            try step("token-sign", #"{"count":200,"token_p50_ms":0.8,"token_max_ms":3,"file_p50_ms":0.05}"#),
            try run("token", refresh: false, p99: 1.0, tokens: 1),
            try run("token", refresh: true, p99: 1.25, max: 4, tokens: 2),
            try run("token", refresh: false, p99: 1.5, tokens: 1),
            try run("token", refresh: true, p99: 1.75, max: 6, tokens: 2),
            try run("slow_token", refresh: false, p99: 1.0, tokens: 1),
            try run("slow_token", refresh: true, p99: 0.75, max: 260, tokens: 2),
            try run("file", refresh: false, p99: 0.5, tokens: 1),
            try run("file", refresh: true, p99: 0.6, tokens: 2),
        ])
        let figures = report.figures()
        #expect(value(figures, "token_p99_ms") == 1.25)
        #expect(value(figures, "token_refresh_p99_ms") == 1.5)
        #expect(value(figures, "token_refresh_p99_ratio") == 1.2)
        #expect(value(figures, "token_refresh_max_ms") == 5)
        #expect(value(figures, "slow_token_refresh_p99_ratio") == 0.75)
        #expect(value(figures, "slow_token_refresh_max_ms") == 260)
        #expect(value(figures, "file_refresh_p99_ratio") == 0.6 / 0.5)
        #expect(value(figures, "token_sign_ms") == 0.8)
        #expect(value(figures, "file_sign_ms") == 0.05)
        let table = report.table(figures, targets: [], mode: "token")
        #expect(table.contains("| token | half way | 1.250 | 1.500 | 4.000 | 2 | 0 | yes |"))
        #expect(table.contains("| file | none | 0.500 | 1.500 | 5.000 | 1 | 0 | yes |"))
        #expect(table.contains("| slow_token | half way | 0.750 | 1.500 | 260.000 | 2 | 0 | yes |"))
    }

    @Test("a --token run leaves every other figure null and passes; a full run with only these fails")
    func tokenMode() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let results = FileManager.default.temporaryDirectory.appendingPathComponent("bench-token-\(getpid()).jsonl")
        defer { try? FileManager.default.removeItem(at: results) }
        let steps = [
            try run("token", refresh: false, p99: 1.0, tokens: 1), try run("token", refresh: true, p99: 1.0, tokens: 2),
        ]
        let lines = try steps.map { step in
            let data = try JSONSerialization.data(withJSONObject: step.data)
            return #"{"step":"\#(step.name)","data":\#(String(decoding: data, as: UTF8.self))}"#
        }
        try (lines.joined(separator: "\n") + "\n").write(to: results, atomically: true, encoding: .utf8)
        let targets = root.appendingPathComponent("scripts/bench-targets.json").path
        func report(_ mode: String) throws -> Int32 {
            try BenchReport.run(try Arguments(["--results", results.path, "--targets", targets, "--mode", mode]))
        }
        #expect(try report("token") == 0)
        #expect(try report("full") == 1)
    }

    @Test("a refresh run in which the simulator saw one token (no refresh), or a run short of 200s, is not counted")
    func runsThatDoNotCount() throws {
        let noRefresh = BenchReport(steps: [
            try run("token", refresh: false, p99: 1.0, tokens: 1),
            try run("token", refresh: true, p99: 1.0, tokens: 1),
        ]).figures()
        #expect(value(noRefresh, "token_p99_ms") == 1.0)
        #expect(value(noRefresh, "token_refresh_p99_ms") == nil)
        #expect(value(noRefresh, "token_refresh_p99_ratio") == nil)
        let twoTokensWithout = BenchReport(steps: [try run("file", refresh: false, p99: 1.0, tokens: 2)]).figures()
        #expect(value(twoTokensWithout, "file_p99_ms") == nil)
        let failing = BenchReport(steps: [try run("file", refresh: true, p99: 1.0, tokens: 2, ok: 14000)]).figures()
        #expect(value(failing, "file_refresh_p99_ms") == nil)
        let nothing = BenchReport(steps: []).figures()
        #expect(value(nothing, "token_p99_ms") == nil && value(nothing, "token_sign_ms") == nil)
    }
}
