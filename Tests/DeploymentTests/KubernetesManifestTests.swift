import Foundation
import RelayTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What an operator signs off in deploy/kubernetes beyond the pod's hardening: one namespace, pinned images,
/// the Redis password on no command line, NetworkPolicies that admit only what the relay needs, generated
/// ConfigMaps (a change rolls the pods), and requests that match the limits.
@Suite struct KubernetesManifestTests {
    static let kubectl = "/usr/bin/kubectl"
    static let redisServer = "/usr/bin/redis-server"
    static let redisCLI = "/usr/bin/redis-cli"

    static func kustomization() throws -> JSONNode {
        try Manifests.load(["deploy/kubernetes/kustomization.yaml"])[0].document
    }

    static func redis() throws -> [(file: String, document: JSONNode)] {
        try Manifests.load(["deploy/kubernetes/redis/redis.yaml", "deploy/kubernetes/redis/networkpolicy.yaml"])
    }

    /// Both pods' containers: the relay's and Redis's.
    static func containers() throws -> [(name: String, container: JSONNode)] {
        let relay = try Manifests.only("Deployment", in: Manifests.load())
        let redis = try Manifests.only("Deployment", in: redis())
        return [relay, redis].flatMap { deployment in
            deployment["spec"]["template"]["spec"]["containers"].array.map {
                (name: deployment["metadata"]["name"].string ?? "?", container: $0)
            }
        }
    }

    @Test("everything is applied in one namespace, which enforces Pod Security's restricted profile")
    func oneRestrictedNamespace() throws {
        let namespace = try Manifests.only("Namespace", in: Manifests.load())
        let name = try #require(namespace["metadata"]["name"].string)
        #expect(try Self.kustomization()["namespace"].string == name)
        #expect(namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"].string == "restricted")
        // The operator's kustomization (docs/operations/containers.md) puts its generated Secret there too.
        let recipe = Documentation.section("Kubernetes", of: try Repository.text("docs/operations/containers.md"))
        #expect(
            recipe.contains("\nnamespace: \(name)\n"),
            "docs/operations/containers.md's kustomization has no namespace: \(name)")
        // Redis's pod meets the profile as the relay's does.
        let pod = try Manifests.only("Deployment", in: Self.redis())["spec"]["template"]["spec"]
        #expect(pod["securityContext"]["runAsNonRoot"].bool == true)
        #expect(pod["securityContext"]["seccompProfile"]["type"].string == "RuntimeDefault")
        for container in pod["containers"].array {
            #expect(container["securityContext"]["allowPrivilegeEscalation"].bool == false)
            #expect(container["securityContext"]["capabilities"]["drop"].strings == ["ALL"])
        }
    }

    @Test("every image names its registry and an exact release (or a digest), never a floating tag")
    func imagesArePinned() throws {
        let containers = try Self.containers()
        #expect(containers.count == 2)
        for (deployment, container) in containers {
            let image = try #require(container["image"].string)
            #expect(Self.isPinned(image), "\(deployment): \(image) is not pinned")
        }
        for floating in ["redis:7", "redis", "docker.io/library/redis:latest", "docker.io/library/redis:7.0"] {
            #expect(!Self.isPinned(floating), "\(floating) passed as pinned")
        }
        #expect(Self.isPinned("docker.io/library/redis:7.0.15-bookworm"))
        #expect(Self.isPinned("registry.example.org/duo-relay@sha256:" + String(repeating: "ab", count: 32)))
    }

    /// `registry.host/path:MAJOR.MINOR.PATCH[-suffix]`, or any name with `@sha256:` and 64 hex digits.
    static func isPinned(_ image: String) -> Bool {
        if let at = image.range(of: "@sha256:") {
            let digest = image[at.upperBound...]
            return digest.count == 64 && digest.allSatisfy(\.isHexDigit)
        }
        let parts = image.split(separator: "/")
        guard parts.count >= 2, parts[0].contains("."), let last = parts.last, let colon = last.lastIndex(of: ":")
        else { return false }
        let release = last[last.index(after: colon)...].split(separator: "-", maxSplits: 1)[0]
        let numbers = release.split(separator: ".", omittingEmptySubsequences: false)
        return numbers.count == 3 && numbers.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }
    }

    @Test("memory is requested in full and CPU within a factor of two of its limit; the relay may use its threads")
    func requestsMatchLimits() throws {
        for (deployment, container) in try Self.containers() {
            let resources = container["resources"]
            let memory = resources["requests"]["memory"].string
            #expect(memory != nil && memory == resources["limits"]["memory"].string, "\(deployment): memory")
            let request = try #require(Self.cores(resources["requests"]["cpu"]), "\(deployment): cpu request")
            let limit = try #require(Self.cores(resources["limits"]["cpu"]), "\(deployment): cpu limit")
            #expect(request > 0 && limit >= request && limit <= 2 * request, "\(deployment): \(request) of \(limit)")
        }
        let relay = try #require(try Self.containers().first { $0.name == "duo-relay" }?.container)
        let threads = try DeploymentArtifactTests.exampleConfiguration(DeploymentArtifactTests.configMap)["server"][
            "threads"
        ].int
        let limit = try #require(Self.cores(relay["resources"]["limits"]["cpu"]))
        #expect(limit >= Double(try #require(threads)), "the relay's \(threads ?? 0) threads cannot all run")
    }

    /// A CPU quantity (`"2"`, `2`, `"500m"`) in cores.
    static func cores(_ node: JSONNode) -> Double? {
        if let whole = node.int { return Double(whole) }
        guard let text = node.string else { return nil }
        if text.hasSuffix("m") { return Double(text.dropLast()).map { $0 / 1000 } }
        return Double(text)
    }

    @Test(
        "the relay's NetworkPolicy admits only the front to http and Prometheus to metrics; out, only DNS, Redis, APNs")
    func relayNetworkPolicy() throws {
        let manifests = try Manifests.load()
        let policy = try Manifests.only("NetworkPolicy", in: manifests)
        let deployment = try Manifests.only("Deployment", in: manifests)
        let podLabels = deployment["spec"]["template"]["metadata"]["labels"]
        let selector = policy["spec"]["podSelector"]["matchLabels"]
        #expect(!selector.keys.isEmpty)
        for key in selector.keys { #expect(podLabels[key].string == selector[key].string, "podSelector: \(key)") }
        #expect(Set(policy["spec"]["policyTypes"].strings) == ["Ingress", "Egress"])

        // In: each rule names its sources and one port; nothing else is open.
        let ingress = policy["spec"]["ingress"].array
        #expect(ingress.count == 2)
        var portsIn: [String: JSONNode] = [:]
        for rule in ingress {
            let sources = rule["from"].array
            #expect(!sources.isEmpty, "an ingress rule without `from` admits every pod")
            for source in sources {
                #expect(source["namespaceSelector"]["matchLabels"].keys.count == 1, "a source in every namespace")
                #expect(!source["podSelector"]["matchLabels"].keys.isEmpty, "every pod of a namespace")
                #expect(!source["ipBlock"].exists)
            }
            let ports = rule["ports"].array
            #expect(ports.count == 1)
            if let port = ports.first?["port"].string { portsIn[port] = sources[0] }
        }
        #expect(Set(portsIn.keys) == ["http", "metrics"])
        #expect(
            portsIn["http"]?["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"].string
                == "ingress-nginx")
        // The named ports are the relay's.
        let containerPorts = deployment["spec"]["template"]["spec"]["containers"][0]["ports"].array.compactMap {
            $0["name"].string
        }
        #expect(Set(portsIn.keys).isSubset(of: Set(containerPorts)))

        // Out: DNS to kube-dns, Redis's port to Redis's pods, 443 and 2197 to Apple's 17.0.0.0/8.
        let egress = policy["spec"]["egress"].array
        #expect(egress.count == 3)
        for rule in egress {
            #expect(!rule["to"].array.isEmpty, "an egress rule without `to` allows every destination")
            #expect(!rule["ports"].array.isEmpty, "an egress rule without `ports` allows every port")
        }
        let dns = try #require(egress.first { $0["ports"].array.contains { $0["port"].int == 53 } })
        #expect(Set(dns["ports"].array.compactMap { $0["protocol"].string }) == ["UDP", "TCP"])
        #expect(dns["to"][0]["podSelector"]["matchLabels"]["k8s-app"].string == "kube-dns")
        #expect(dns["to"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"].string == "kube-system")
        let redisLabels = try Manifests.only("Deployment", in: Self.redis())["spec"]["template"]["metadata"]["labels"]
        let store = try #require(egress.first { $0["ports"].array.contains { $0["port"].int == 6379 } })
        let storeSelector = store["to"][0]["podSelector"]["matchLabels"]
        #expect(!storeSelector.keys.isEmpty)
        for key in storeSelector.keys { #expect(redisLabels[key].string == storeSelector[key].string) }
        let apns = try #require(egress.first { $0["to"][0]["ipBlock"].exists })
        #expect(apns["to"].array.map { $0["ipBlock"]["cidr"].string } == ["17.0.0.0/8"])
        #expect(Set(apns["ports"].array.compactMap { $0["port"].int }) == [443, 2197])
        #expect(apns["ports"].array.allSatisfy { $0["protocol"].string == "TCP" })
    }

    @Test("Redis's NetworkPolicy admits only the relay's pods to its port and lets it reach nothing")
    func redisNetworkPolicy() throws {
        let redis = try Self.redis()
        let policy = try Manifests.only("NetworkPolicy", in: redis)
        let pods = try Manifests.only("Deployment", in: redis)["spec"]["template"]
        let selector = policy["spec"]["podSelector"]["matchLabels"]
        #expect(!selector.keys.isEmpty)
        for key in selector.keys { #expect(pods["metadata"]["labels"][key].string == selector[key].string) }
        #expect(Set(policy["spec"]["policyTypes"].strings) == ["Ingress", "Egress"])
        #expect(policy["spec"]["egress"].array.isEmpty, "Redis opens no connection")
        let ingress = policy["spec"]["ingress"].array
        #expect(ingress.count == 1)
        let relayLabels = try Manifests.only("Deployment", in: Manifests.load())["spec"]["template"]["metadata"][
            "labels"
        ]
        let from = ingress.first?["from"].array ?? []
        #expect(from.count == 1)
        let fromSelector = from.first?["podSelector"]["matchLabels"] ?? JSONNode(nil)
        #expect(!fromSelector.keys.isEmpty)
        for key in fromSelector.keys { #expect(relayLabels[key].string == fromSelector[key].string) }
        #expect(ingress.first?["ports"].array.map { $0["port"].string } == ["redis"])
        #expect(pods["spec"]["containers"][0]["ports"].array.contains { $0["name"].string == "redis" })
    }

    @Test("both ConfigMaps are generated (their names follow their contents), and no manifest holds one")
    func configMapsAreGenerated() throws {
        let kustomization = try Self.kustomization()
        let generators = kustomization["configMapGenerator"].array
        #expect(
            Dictionary(uniqueKeysWithValues: generators.map { ($0["name"].string ?? "", $0["files"].strings) })
                == ["duo-relay-config": ["relay.json"], "duo-relay-redis-config": ["redis/redis.conf"]])
        #expect(kustomization["generatorOptions"]["disableNameSuffixHash"].bool != true)
        for (file, document) in try Manifests.load() + Self.redis() {
            #expect(document["kind"].string != "ConfigMap", "\(file) holds a ConfigMap: a change would not roll")
        }
        for deployment in [
            try Manifests.only("Deployment", in: Manifests.load()),
            try Manifests.only(
                "Deployment", in: Self.redis()),
        ] {
            let volumes = deployment["spec"]["template"]["spec"]["volumes"].array
            let named = volumes.compactMap { $0["configMap"]["name"].string }
            #expect(named.count == 1)
            #expect(generators.contains { $0["name"].string == named.first })
        }
    }

    @Test(
        "kubectl kustomize: a changed relay.json or redis.conf renames its ConfigMap in the pod template, all in the namespace",
        .enabled(if: Tool.isAvailable(kubectl), "kubectl is not installed (scripts/install-deps --container)"))
    func aChangedConfigurationRollsThePods() throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let copy = scratch.url.appendingPathComponent("kubernetes")
        try FileManager.default.copyItem(at: Repository.url("deploy/kubernetes"), to: copy)
        let before = try Self.render(copy)
        for (file, change) in [("relay.json", #"grant_key_id": 1"#), ("redis/redis.conf", "maxmemory 128mb")] {
            let path = copy.appendingPathComponent(file)
            let text = try String(contentsOf: path, encoding: .utf8)
            #expect(text.contains(change), "\(file)")
            try text.replacingOccurrences(of: change, with: change.replacingOccurrences(of: "1", with: "2"))
                .write(to: path, atomically: true, encoding: .utf8)
        }
        let after = try Self.render(copy)
        for (deployment, generator) in [
            ("duo-relay", "duo-relay-config"), ("duo-relay-redis", "duo-relay-redis-config"),
        ] {
            let old = try #require(before[deployment])
            let new = try #require(after[deployment])
            #expect(old.hasPrefix(generator + "-") && new.hasPrefix(generator + "-"), "\(old) \(new)")
            #expect(old != new, "\(deployment) mounts \(old) both times: a change would not roll its pods")
        }
    }

    /// Renders `directory` with kubectl kustomize: each Deployment's ConfigMap volume's name. Every resource but
    /// the Namespace must be in the namespace duo-relay.
    static func render(_ directory: URL) throws -> [String: String] {
        let result = try Tool.run(kubectl, ["kustomize", directory.path])
        guard result.status == 0 else { throw TestFailure("kubectl kustomize: \(result.errors)") }
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let rendered = try scratch.write(result.output, to: "rendered.yaml")
        var mounted: [String: String] = [:]
        let documents = try Manifests.load([rendered.path])
        for (_, document) in documents where document["kind"].string != "Namespace" {
            #expect(
                document["metadata"]["namespace"].string == "duo-relay", "\(document["metadata"]["name"].string ?? "")")
        }
        for (_, document) in documents where document["kind"].string == "Deployment" {
            let volume = document["spec"]["template"]["spec"]["volumes"].array.first { $0["configMap"].exists }
            mounted[document["metadata"]["name"].string ?? "?"] = volume?["configMap"]["name"].string
        }
        return mounted
    }

    @Test(
        "Redis starts as the manifest says: the Secret's password, quoted, and on no command line",
        .enabled(
            if: Tool.isAvailable(redisServer) && Tool.isAvailable(redisCLI),
            "redis-server is not installed (scripts/install-deps --test)"))
    func redisPasswordStaysOffTheCommandLine() async throws {
        let pod = try Manifests.only("Deployment", in: Self.redis())["spec"]["template"]["spec"]
        let container = pod["containers"][0]
        let argv = container["command"].strings + container["args"].strings
        #expect(!argv.contains { $0.hasPrefix("--requirepass") }, "the password as an argument: \(argv)")
        let mounts = container["volumeMounts"].array
        let secretPath = try #require(mounts.first { $0["name"].string == "secrets" }?["mountPath"].string)
        let configPath = try #require(mounts.first { $0["name"].string == "config" }?["mountPath"].string)
        #expect(argv.joined(separator: " ").contains(secretPath + "/REDIS_PASSWORD"))

        // The manifest's own command, run here with the Secret's and ConfigMap's files where the pod has them.
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let password = #"pa ss"w\rd-\#(UUID().uuidString)"#
        _ = try scratch.write(password + "\r\n", to: "REDIS_PASSWORD", mode: 0o600)
        let port = try freePort()
        let conf = try Repository.text("deploy/kubernetes/redis/redis.conf")
            .replacingOccurrences(of: "bind * -::*", with: "bind 127.0.0.1")
            .replacingOccurrences(of: "port 6379", with: "port \(port)")
        _ = try scratch.write(conf, to: "redis.conf")
        let local = argv.map {
            $0.replacingOccurrences(of: secretPath + "/REDIS_PASSWORD", with: scratch.url.path + "/REDIS_PASSWORD")
                .replacingOccurrences(of: configPath + "/redis.conf", with: scratch.url.path + "/redis.conf")
        }
        #expect(local.first == "sh")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = Array(local.dropFirst())
        process.currentDirectoryURL = scratch.url
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            // SIGKILL: the child inherits the test thread's signal mask, in which SIGTERM may be blocked.
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        #expect(await waitUntilListening(port: port, process: process), "redis-server did not start")
        // The shell's process became redis-server (exec: it gets the pod's SIGTERM), and no argument holds the
        // password.
        let commandLine = String(
            decoding: try Data(contentsOf: URL(fileURLWithPath: "/proc/\(process.processIdentifier)/cmdline")),
            as: UTF8.self
        ).replacingOccurrences(of: "\0", with: " ")
        #expect(commandLine.hasPrefix("redis-server"), "\(commandLine)")
        #expect(!commandLine.contains(password) && !commandLine.contains("pa ss"))
        let without = try await Tool.run(Self.redisCLI, ["-h", "127.0.0.1", "-p", "\(port)", "ping"])
        #expect(without.output.contains("NOAUTH"), "\(without.output)")
        let with = try await Tool.run(
            Self.redisCLI, ["-h", "127.0.0.1", "-p", "\(port)", "ping"], environment: ["REDISCLI_AUTH": password])
        #expect(with.output == "PONG\n", "\(with.output) \(with.errors)")
    }
}
