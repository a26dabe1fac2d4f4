import Foundation

/// What `push-instructions` decides without starting a server: the files it writes for the servers, what it reads
/// back from callgrind's profiles and the load's JSON, and the arithmetic of its figures.
enum PushInstructionsReadings {
    // MARK: - Files

    /// The relay's configuration (the benchmark's, ``BenchFiles``): memory limits unless `redisPort` names a Redis,
    /// APNs through `proxyPort`'s proxy if given. Under callgrind the relay runs tens of times slower, so a Redis call
    /// may take a second.
    static func relayConfiguration(simulatorPort: Int, caFile: String, redisPort: Int?, proxyPort: Int?) -> String {
        BenchFiles.relayConfiguration(
            simulatorPort: simulatorPort, caFile: caFile, storePort: redisPort, threads: nil, proxyPort: proxyPort,
            storeTimeoutMilliseconds: 1000, addressPeriodSeconds: 10)
    }

    /// tinyproxy's configuration: loopback only, warnings to `logFile`.
    static func tinyproxyConfiguration(port: Int, logFile: String) -> String {
        "Port \(port)\nListen 127.0.0.1\nAllow 127.0.0.1\nMaxClients 100\nLogFile \"\(logFile)\"\nLogLevel Warning\n"
    }

    // MARK: - Readings

    /// The file of callgrind's last dump among `names`: `prefix` followed by `.N`, the highest N.
    static func lastDump(_ names: [String], prefix: String) -> String? {
        names.compactMap { name -> (Int, String)? in
            guard name.hasPrefix(prefix + "."), let number = Int(name.dropFirst(prefix.count + 1)) else { return nil }
            return (number, name)
        }.max { $0.0 < $1.0 }?.1
    }

    /// The requests answered in an `open-loop` JSON line, if every answer was a 200 (nil otherwise, or if none was).
    static func allAnswered200(_ load: String) -> Int? {
        guard let data = load.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let statuses = object["statuses"] as? [String: Any], statuses.count == 1,
            let ok = (statuses["200"] as? NSNumber)?.intValue, ok > 0
        else { return nil }
        return ok
    }

    /// The program's total instructions in `callgrind_annotate`'s output.
    static func programTotal(_ annotation: String) -> Int? {
        firstCount(annotation) { $0.contains("PROGRAM TOTALS") }
    }

    /// The instructions spent inside `SSL_do_handshake` (`callgrind_annotate --inclusive=yes`), if it ran at all.
    static func handshakes(_ inclusiveAnnotation: String) -> Int? {
        firstCount(inclusiveAnnotation) { $0.contains(":SSL_do_handshake ") }
    }

    /// The count leading the first line that `matches`: digits with thousands' commas, after spaces, before a space.
    private static func firstCount(_ text: String, where matches: (Substring) -> Bool) -> Int? {
        for line in text.split(separator: "\n") where matches(line) {
            let counted = line.drop { $0 == " " }
            let digits = counted.prefix { $0.isASCII && ($0.isNumber || $0 == ",") }
            guard counted.dropFirst(digits.count).first == " " else { continue }
            return Int(digits.filter { $0 != "," })
        }
        return nil
    }

    /// The functions that spend the most (self cost) from `callgrind_annotate`'s output: the thread start and the
    /// event loop's own frames left out, at most `count`, paths shortened to the module's source file and the
    /// object's file name, each line at most 160 characters.
    static func topFunctions(_ annotation: String, count: Int = 30) -> [String] {
        let lines = annotation.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0.contains("file:function") }) else { return [] }
        let skipped = ["clone.S", "pthread_create.c", "EventLoop.swift"]
        let kept = lines[start...].filter { line in !skipped.contains { line.contains($0) } }
        // The header and its rule first.
        return kept.dropFirst(2).prefix(count).map { String(shortened(String($0)).prefix(160)) }
    }

    /// `…/Sources/Layer/Module/File.swift` as `Layer/Module/File.swift`, ` [/usr/lib/libx.so]` as ` [libx.so]`.
    static func shortened(_ line: String) -> String {
        var line = line
        // The first path (a run without spaces) holding `/Sources/` after its first slash loses all up to its
        // last `/Sources/`.
        for slash in line.indices where line[slash] == "/" {
            let path = line[line.index(after: slash)...].prefix { $0 != " " }
            if let sources = path.range(of: "/Sources/", options: .backwards) {
                line.removeSubrange(slash..<sources.upperBound)
                break
            }
        }
        // An object's path in brackets at the end keeps its file name.
        if line.hasSuffix("]"), let open = line.range(of: " [/"),
            !line[open.upperBound...].dropLast().contains("]"),
            let slash = line[open.upperBound...].lastIndex(of: "/")
        {
            line = String(line[..<open.lowerBound]) + " [" + line[line.index(after: slash)...]
        }
        return line
    }

    // MARK: - Arithmetic

    /// `callgrind-by-library`'s "in all" figure (thousands of instructions a request), as printed.
    static func inAll(_ libraries: String) -> String? {
        libraries.split(separator: "\n").first { $0.contains("in all") }?.split(separator: " ").first.map(String.init)
    }

    /// The libraries a push requires (nghttp2, libcrypto, libssl), thousands of instructions a push, less a TLS
    /// handshake's share that fell in the window (it is the connection's, not the push's).
    static func requiredLibraries(_ libraries: String, handshakePerPush: Int) -> String {
        var sum = 0.0
        for line in libraries.split(separator: "\n")
        where ["libnghttp2", "libcrypto", "libssl"].contains(where: { line.contains($0) }) {
            sum += line.split(separator: " ").first.flatMap { Double($0) } ?? 0
        }
        return String(format: "%.1f", sum - Double(handshakePerPush) / 1000)
    }

    /// The relay's and nginx's libraries side by side, line by line: `  relay  |  nginx`.
    static func sideBySide(_ relay: String, _ nginx: String) -> [String] {
        let left: [String] = relay.split(separator: "\n").map { String($0.drop { $0 == " " }) }
        let right: [String] = nginx.split(separator: "\n").map { String($0.drop { $0 == " " }) }
        return (0..<max(left.count, right.count)).map { (index: Int) -> String in
            let relayLine = index < left.count ? left[index] : ""
            let nginxLine = index < right.count ? right[index] : ""
            return "  \(relayLine)  |  \(nginxLine)"
        }
    }
}
