import Foundation
import RedisTestSupport
import RelayTestSupport

/// Debian's `prometheus` server on a free loopback port, scraping one relay's metrics listener every second as
/// job `duo-relay`, from deploy/prometheus/prometheus.example.yml with the relay's address and the alert rules it
/// loads. Stopped by its PID.
final class PrometheusProcess: @unchecked Sendable {
    // @unchecked: made, queried and stopped by the one test that owns it.
    static let executable = "/usr/bin/prometheus"
    let port: UInt16
    let directory: URL
    private let process: Process

    init(scraping metricsPort: UInt16, rules root: URL) throws {
        directory = try RelayProcess.temporaryDirectory()
        let example = try String(
            contentsOf: root.appendingPathComponent("deploy/prometheus/prometheus.example.yml"), encoding: .utf8)
        guard example.contains(#""127.0.0.1:9787""#) else {
            throw TestFailure("prometheus.example.yml no longer scrapes 127.0.0.1:9787")
        }
        let config =
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            + example.replacingOccurrences(of: #""127.0.0.1:9787""#, with: #""127.0.0.1:\#(metricsPort)""#)
        try config.write(to: directory.appendingPathComponent("prometheus.yml"), atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(
            at: root.appendingPathComponent("deploy/prometheus/alerts.rules.yml"),
            to: directory.appendingPathComponent("alerts.rules.yml"))
        guard let port = ServerProcess.freePort() else { throw TestFailure("no free port for prometheus") }
        self.port = port
        process = try ServerProcess.run(
            Self.executable,
            [
                "--config.file=" + directory.appendingPathComponent("prometheus.yml").path,
                "--storage.tsdb.path=" + directory.appendingPathComponent("data").path,
                "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn",
            ], listeningOn: port, name: "prometheus")
    }

    /// The values of an instant query's series now (empty: no data), through `GET /api/v1/query`.
    func query(_ expression: String) throws -> [Double] {
        let result = try Tool.run(
            "/usr/bin/curl",
            [
                "-sS", "--max-time", "5", "-G", "--data-urlencode", "query=" + expression,
                "http://127.0.0.1:\(port)/api/v1/query",
            ], timeout: .seconds(10))
        guard result.status == 0,
            let json = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any],
            json["status"] as? String == "success", let data = json["data"] as? [String: Any]
        else { throw TestFailure("prometheus: \(expression): \(result.output) \(result.errors)") }
        if data["resultType"] as? String == "scalar" {
            return [(data["result"] as? [Any])?.last.flatMap { Double($0 as? String ?? "") } ?? .nan]
        }
        let series = data["result"] as? [[String: Any]] ?? []
        return series.map { ($0["value"] as? [Any])?.last.flatMap { Double($0 as? String ?? "") } ?? .nan }
    }

    func stop() {
        ServerProcess.stop(process)
        try? FileManager.default.removeItem(at: directory)
    }

    deinit { stop() }
}
