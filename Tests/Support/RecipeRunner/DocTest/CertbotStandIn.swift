import Foundation
import Glibc

/// `certbot` where no ACME server can be reached (the doc test's namespace has no network): what certbot does on the
/// host once a certificate is issued, with the issuing played by a CA of the run's own. `certonly -d NAME...
/// --deploy-hook HOOK` (any authenticator) and `renew [--force-renewal]` write the lineage as certbot does
/// (`/etc/letsencrypt/archive/NAME/{cert,chain,fullchain,privkey}N.pem`, with `live/NAME/*.pem` links to the newest,
/// the key 0600), keep the hook in `renewal/NAME.conf`, and run the hook through the shell once for the lineage with
/// certbot's documented variables: `RENEWED_LINEAGE` (the `live/NAME` directory) and `RENEWED_DOMAINS` (the names,
/// space-separated). `renew` renews only with `--force-renewal` (a new key and certificate valid 90 days are never
/// due). A failed hook fails the command, naming the hook. The CA (`STATE/certbot/ca.pem`, for the scenario's clients)
/// is made at the first issuance.
enum CertbotStandIn {
    static let root = "/etc/letsencrypt"

    static func run(_ arguments: [String]) -> Int32 {
        guard let state = ProcessInfo.processInfo.environment["DOC_TEST_SYSTEMD"] else {
            printError("certbot (doc-test stand-in): DOC_TEST_SYSTEMD is needed")
            return 1
        }
        let ca = state + "/certbot"
        switch arguments.first {
        case "certonly":
            var names: [String] = []
            var hook: String?
            var rest = arguments.dropFirst()
            while let option = rest.popFirst() {
                switch option {
                case "-d", "--domain", "--domains":
                    names += (rest.popFirst() ?? "").split(separator: ",").map(String.init)
                case "--deploy-hook": hook = rest.popFirst()
                default: continue
                }
            }
            guard let name = names.first else {
                printError("certbot (doc-test stand-in): certonly needs -d NAME")
                return 1
            }
            let lineage = Lineage(name: name)
            let renewal = "domains = \(names.joined(separator: ","))\n" + (hook.map { "deploy_hook = \($0)\n" } ?? "")
            guard
                (try? FileManager.default.createDirectory(atPath: root + "/renewal", withIntermediateDirectories: true))
                    != nil,
                (try? renewal.write(toFile: lineage.renewal, atomically: true, encoding: .utf8)) != nil
            else { return 1 }
            return issue(lineage, names: names, hook: hook, ca: ca)
        case "renew":
            guard arguments.contains("--force-renewal") else {
                print("certbot (doc-test stand-in): no certificate is due for renewal")
                return 0
            }
            let files = (try? FileManager.default.contentsOfDirectory(atPath: root + "/renewal")) ?? []
            for file in files.sorted() where file.hasSuffix(".conf") {
                let lineage = Lineage(name: String(file.dropLast(".conf".count)))
                let settings = settings(read(lineage.renewal))
                let names = (settings["domains"] ?? lineage.name).split(separator: ",").map(String.init)
                let status = issue(lineage, names: names, hook: settings["deploy_hook"], ca: ca)
                guard status == 0 else { return status }
            }
            return 0
        default:
            printError("certbot (doc-test stand-in): only certonly and renew are played here")
            return 1
        }
    }

    /// A certificate's files under /etc/letsencrypt.
    struct Lineage {
        let name: String
        var archive: String { root + "/archive/" + name }
        var live: String { root + "/live/" + name }
        var renewal: String { root + "/renewal/" + name + ".conf" }
    }

    /// The `key = value` lines of a renewal file.
    static func settings(_ text: String) -> [String: String] {
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2 { values[parts[0]] = parts[1] }
        }
        return values
    }

    /// A new key and certificate for `names` as the lineage's next version, the live links moved to it, then the
    /// deploy hook as certbot runs it.
    static func issue(_ lineage: Lineage, names: [String], hook: String?, ca: String) -> Int32 {
        let manager = FileManager.default
        do {
            try manager.createDirectory(atPath: lineage.archive, withIntermediateDirectories: true)
            try manager.createDirectory(atPath: lineage.live, withIntermediateDirectories: true)
            try makeCA(ca)
            let existing = (try? manager.contentsOfDirectory(atPath: lineage.archive)) ?? []
            let version =
                (existing.compactMap { Int($0.dropFirst("cert".count).dropLast(".pem".count)) }.max() ?? 0) + 1
            let scratch = ca + "/issue-\(lineage.name)"
            try? manager.removeItem(atPath: scratch)
            try manager.createDirectory(atPath: scratch, withIntermediateDirectories: true)
            let extensions =
                "subjectAltName=" + names.map { "DNS:" + $0 }.joined(separator: ",")
                + "\nextendedKeyUsage=serverAuth\n"
            try extensions.write(toFile: scratch + "/leaf.ext", atomically: true, encoding: .utf8)
            try openssl(
                [
                    "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj",
                    "/CN=\(names[0])", "-keyout", scratch + "/privkey.pem", "-out", scratch + "/leaf.csr",
                ])
            try openssl(
                [
                    "x509", "-req", "-in", scratch + "/leaf.csr", "-CA", ca + "/ca.pem", "-CAkey", ca + "/ca.key",
                    "-CAcreateserial", "-days", "90", "-extfile", scratch + "/leaf.ext", "-out", scratch + "/cert.pem",
                ])
            let certificate = read(scratch + "/cert.pem")
            let chain = read(ca + "/ca.pem")
            let files = [
                ("cert", certificate), ("chain", chain), ("fullchain", certificate + chain),
                ("privkey", read(scratch + "/privkey.pem")),
            ]
            for (kind, text) in files {
                let path = lineage.archive + "/\(kind)\(version).pem"
                try text.write(toFile: path, atomically: true, encoding: .utf8)
                chmod(path, kind == "privkey" ? 0o600 : 0o644)
                let link = lineage.live + "/\(kind).pem"
                try? manager.removeItem(atPath: link)
                try manager.createSymbolicLink(
                    atPath: link, withDestinationPath: "../../archive/\(lineage.name)/\(kind)\(version).pem")
            }
            try? manager.removeItem(atPath: scratch)
        } catch {
            printError("certbot (doc-test stand-in): cannot issue for \(lineage.name): \(error)")
            return 1
        }
        print("Successfully received certificate.\nCertificate is saved at: \(lineage.live)/fullchain.pem")
        guard let hook else { return 0 }
        let ran = try? RecipeProcess.run(
            "/bin/sh", ["-c", hook],
            environment: ["RENEWED_LINEAGE": lineage.live, "RENEWED_DOMAINS": names.joined(separator: " ")],
            output: .inherited, error: .inherited)
        guard ran?.status == 0 else {
            printError("Hook 'deploy-hook' ran with error; command: \(hook)")
            return 1
        }
        return 0
    }

    /// The run's own CA, made once: what the scenario's clients trust in place of a public one.
    static func makeCA(_ directory: String) throws {
        guard access(directory + "/ca.pem", R_OK) != 0 else { return }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try openssl(
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                "-subj", "/CN=doc-test ACME CA", "-keyout", directory + "/ca.key", "-out", directory + "/ca.pem",
            ])
        chmod(directory + "/ca.pem", 0o644)
    }

    static func openssl(_ arguments: [String]) throws {
        let ran = try RecipeProcess.run("openssl", arguments, output: .discard, error: .captured)
        guard ran.status == 0 else { throw RecipeFailure.check("openssl \(arguments[0]) failed", detail: ran.error) }
    }

    static func read(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
}
