import Foundation
import RelayTestSupport
import Testing

/// The deployment artifacts in `deploy/`, checked against the relay as docs/operations/configuration.md documents it and,
/// where the tool is installed (`scripts/install-deps --test` installs each), by the program that
/// will read them: systemd-analyze, python3-yaml, nginx, caddy.
@Suite struct DeploymentArtifactTests {
    static let unitPath = "deploy/systemd/duo-relay.service"
    static let socketPath = "deploy/systemd/duo-relay.socket"
    static let systemdConfiguration = "deploy/systemd/relay.json"
    static let relayEnvironment = "deploy/systemd/relay.env"
    /// The relay's configuration on Kubernetes: the file the kustomization generates its ConfigMap from.
    static let configMap = "deploy/kubernetes/relay.json"
    static let containerConfiguration = "deploy/container/relay.json"
    static let dockerfile = "deploy/container/Dockerfile"
    static let nginx = "deploy/proxy/nginx.conf"
    static let caddyfile = "deploy/proxy/Caddyfile"

    static let systemdAnalyze = "/usr/bin/systemd-analyze"
    static let nginxBinary = "/usr/sbin/nginx"
    static let caddyBinary = "/usr/bin/caddy"
    static let openssl = "/usr/bin/openssl"

    static let binary = "/usr/local/bin/duo-relay"
    static let configPath = "/etc/duo-relay/relay.json"

    // MARK: - systemd

    @Test(
        "systemd-analyze verify accepts the unit without a single warning",
        .enabled(if: Tool.isAvailable(systemdAnalyze)))
    func unitVerifies() throws {
        let result = try Self.verifyUnit(try Repository.text(Self.unitPath))
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.errors.isEmpty, "\(result.errors)")
        #expect(result.output.isEmpty, "\(result.output)")
    }

    @Test(
        "systemd-analyze verify reports a misspelt directive, so the check above can fail",
        .enabled(if: Tool.isAvailable(systemdAnalyze)))
    func verifyReportsMisspeltDirectives() throws {
        let unit = try Repository.text(Self.unitPath)
            .replacingOccurrences(of: "[Service]\n", with: "[Service]\nProtectSystm=strict\n")
        let result = try Self.verifyUnit(unit)
        #expect((result.errors + result.output).contains("ProtectSystm"))
    }

    @Test(
        "systemd-analyze verify accepts the socket unit with its service without a single warning",
        .enabled(if: Tool.isAvailable(systemdAnalyze)))
    func socketUnitVerifies() throws {
        let result = try Self.verifyUnit(
            try Repository.text(Self.unitPath), socket: try Repository.text(Self.socketPath))
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.errors.isEmpty, "\(result.errors)")
        #expect(result.output.isEmpty, "\(result.output)")
    }

    @Test(
        "systemd-analyze verify reports a misspelt directive in the socket unit, so the check above can fail",
        .enabled(if: Tool.isAvailable(systemdAnalyze)))
    func verifyReportsMisspeltSocketDirectives() throws {
        let socket = try Repository.text(Self.socketPath)
            .replacingOccurrences(of: "[Socket]\n", with: "[Socket]\nListenStrem=127.0.0.1:1\n")
        let result = try Self.verifyUnit(try Repository.text(Self.unitPath), socket: socket)
        #expect((result.errors + result.output).contains("ListenStrem"))
    }

    /// The socket unit hands one listening socket to the relay's service (no socket per connection), on the address
    /// the example configuration serves otherwise, with a backlog that holds the connections of a restart.
    @Test func theSocketUnitPassesOneListeningSocketToTheService() throws {
        let socket = SystemdUnit(try Repository.text(Self.socketPath))
        #expect(socket.value("Service", in: "Socket") == "duo-relay.service")
        #expect(socket.value("Accept", in: "Socket") == "no")
        #expect(socket.values("ListenStream", in: "Socket").count == 1)
        let configuration = try Self.exampleConfiguration(Self.systemdConfiguration)
        #expect(socket.value("ListenStream", in: "Socket") == configuration["listen"].string)
        #expect(Int(socket.value("Backlog", in: "Socket") ?? "") ?? 0 >= 1024)
        #expect(socket.value("WantedBy", in: "Install") == "sockets.target")
    }

    /// The unit's comment on a stop says what docs/DESIGN.md ("Lifecycle") says the relay answers at the end of
    /// the grace: 503 `overloaded` for a push never sent to APNs, 502 `apns` for one that was.
    @Test func theUnitSaysWhatTheRelayAnswersAtTheEndOfTheGrace() throws {
        let comments = try Repository.text(Self.unitPath).split(separator: "\n").filter { $0.hasPrefix("#") }
            .map { $0.dropFirst().trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
        #expect(comments.contains("503 `overloaded`"))
        #expect(comments.contains("502 `apns`"))
        #expect(!comments.contains("answers the rest 503"))
    }

    @Test(
        "systemd-analyze security rates the unit's exposure 2.0 or lower (OK)",
        .enabled(if: Tool.isAvailable(systemdAnalyze)))
    func unitExposureIsLow() throws {
        let result = try Tool.run(
            Self.systemdAnalyze,
            ["security", "--offline=true", "--threshold=20", "--no-pager", Repository.url(Self.unitPath).path])
        let summary = result.output.split(separator: "\n").first { $0.contains("Overall exposure level") }
        #expect(result.status == 0, "\(summary ?? "") \(result.errors)")
        let score = try #require(
            summary?.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) })
        #expect(score <= 2.0)
    }

    @Test(
        "the unit sets every hardening directive",
        arguments: [
            ("DynamicUser", "yes"), ("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
            ("PrivateTmp", "yes"), ("PrivateDevices", "yes"), ("ProtectKernelTunables", "yes"),
            ("ProtectKernelModules", "yes"), ("ProtectKernelLogs", "yes"), ("ProtectControlGroups", "yes"),
            ("ProtectClock", "yes"), ("ProtectHostname", "yes"),
            ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"),
            ("RestrictNamespaces", "yes"), ("LockPersonality", "yes"), ("MemoryDenyWriteExecute", "yes"),
            ("RestrictRealtime", "yes"), ("RestrictSUIDSGID", "yes"), ("SystemCallArchitectures", "native"),
            ("CapabilityBoundingSet", ""), ("UMask", "0077"), ("LimitNOFILE", "65536"), ("Restart", "on-failure"),
            // No core file: a crash must not write the keys to disk.
            ("LimitCORE", "0"),
            ("KillSignal", "SIGTERM"),
            // libdispatch calls setpriority() (in @resources) for its worker threads: EPERM lets it
            // carry on, where the default action (SIGSYS) would kill the relay.
            ("SystemCallErrorNumber", "EPERM"),
        ])
    func unitHardening(directive: String, expected: String) throws {
        let unit = SystemdUnit(try Repository.text(Self.unitPath))
        #expect(unit.has(directive), "\(directive) is missing")
        #expect(unit.value(directive) == expected)
    }

    @Test("the unit filters system calls to @system-service minus @privileged and @resources")
    func unitSystemCallFilter() throws {
        let unit = SystemdUnit(try Repository.text(Self.unitPath))
        #expect(unit.values("SystemCallFilter") == ["@system-service", "~@privileged @resources"])
    }

    @Test("the unit checks before starting and before reloading, serves, and reloads with SIGHUP")
    func unitCommands() throws {
        let unit = SystemdUnit(try Repository.text(Self.unitPath))
        let check = "\(Self.binary) check --config \(Self.configPath)"
        #expect(unit.values("ExecStartPre") == [check])
        #expect(unit.values("ExecStart") == ["\(Self.binary) serve --config \(Self.configPath)"])
        // Reload only when the new configuration passes the dry run: the check comes first.
        #expect(unit.values("ExecReload") == [check, "/bin/kill -HUP $MAINPID"])
    }

    @Test("the unit waits longer for a stop than the relay's shutdown grace, and holds enough files")
    func unitLimitsFitTheConfiguration() throws {
        let unit = SystemdUnit(try Repository.text(Self.unitPath))
        let configuration = try Self.exampleConfiguration(Self.systemdConfiguration)
        let grace = configuration["server"]["shutdown_grace_s"].int ?? 10
        let stopTimeout = try #require(
            unit.value("TimeoutStopSec").flatMap { Int($0.replacingOccurrences(of: "s", with: "")) })
        #expect(stopTimeout > grace + 5, "TimeoutStopSec \(stopTimeout) s leaves no margin over the \(grace) s grace")
        let files = try #require(unit.value("LimitNOFILE").flatMap { Int($0) })
        #expect(files > configuration["server"]["max_connections"].int ?? 16_384)
    }

    @Test("the unit's credentials are the relay's secret variables, each given once")
    func unitCredentials() throws {
        let unit = SystemdUnit(try Repository.text(Self.unitPath))
        let secretNames = try Documentation.secretNames()
        #expect(secretNames.contains("RELAY_KEYS") && secretNames.contains("APNS_TEAM_ID"))

        var given: [String] = []
        for credential in unit.values("LoadCredential") {
            let parts = credential.split(separator: ":", maxSplits: 1).map(String.init)
            #expect(parts.count == 2, "LoadCredential=\(credential) is not NAME:PATH")
            guard parts.count == 2 else { continue }
            #expect(secretNames.contains(parts[0]), "credential \(parts[0]) is not a variable the relay reads")
            // Named as the credential, so that `CREDENTIALS_DIRECTORY=/etc/duo-relay/credentials duo-relay check`
            // sees what the service will (docs/operations/one-host.md, "systemd").
            #expect(parts[1] == "/etc/duo-relay/credentials/" + parts[0])
            given.append(parts[0])
        }
        #expect(unit.values("EnvironmentFile") == ["/etc/duo-relay/relay.env"])
        let environment = Self.assignments(in: try Repository.text(Self.relayEnvironment))
        for name in environment.keys {
            #expect(secretNames.contains(name), "relay.env sets \(name), which the relay does not read")
        }
        given += environment.keys
        // Secrets proper never travel in the environment, where child processes and /proc would see them.
        for secret in ["RELAY_KEYS", "APNS_KEY_SANDBOX", "APNS_KEY_PRODUCTION"] {
            #expect(environment[secret] == nil)
            #expect(!unit.values("Environment").contains { $0.contains(secret + "=") })
        }
        // The relay refuses a secret given in two forms.
        #expect(Set(given).count == given.count, "a secret is given twice: \(given.sorted())")
        #expect(given.contains("RELAY_KEYS") && given.contains("APNS_TEAM_ID"))
        // An APNs key without its key id, or the reverse, stops the relay.
        #expect(given.contains("APNS_KEY_SANDBOX") || given.contains("APNS_KEY_PRODUCTION"), "no APNs key is given")
        for environment in ["SANDBOX", "PRODUCTION"] {
            let key = "APNS_KEY_" + environment
            let id = "APNS_KEY_ID_" + environment
            #expect(given.contains(key) == given.contains(id), "\(key) and \(id) must be given together")
        }
    }

    // MARK: - The relay configuration examples

    @Test(
        "each example configuration is JSON with only keys the relay accepts",
        arguments: [systemdConfiguration, configMap, containerConfiguration])
    func exampleConfigurationKeys(path: String) throws {
        let accepted = try Documentation.configurationKeys()
        #expect(accepted["apns"]?.contains("topic") == true, "the reference's Configuration example was not read")
        let configuration = try Self.exampleConfiguration(path)
        #expect(configuration.isObject)
        for key in configuration.keys.sorted() {
            let allowed = accepted[key]
            #expect(allowed != nil, "\(key) is not a configuration key")
            if configuration[key].isObject {
                let unknown = configuration[key].keys.subtracting(allowed ?? [])
                #expect(unknown.isEmpty, "\(key) has unknown keys \(unknown.sorted())")
            }
        }
        #expect(configuration["apns"]["topic"].string?.isEmpty == false, "apns.topic is required")
    }

    @Test(
        "each example configuration sits behind a proxy: client address from X-Forwarded-For, no cap per proxy address",
        arguments: [systemdConfiguration, configMap, containerConfiguration])
    func exampleConfigurationTrustsItsProxy(path: String) throws {
        let configuration = try Self.exampleConfiguration(path)
        #expect(configuration["ip_limit"]["client_ip_header"].string == "X-Forwarded-For")
        // Every connection comes from the proxy's address: a per-address cap would cap the proxy.
        #expect(configuration["server"]["max_connections_per_address"].int == 0)
    }

    // MARK: - Kubernetes

    @Test("every Kubernetes manifest parses as YAML, one of each kind, all labelled duo-relay")
    func manifestsParse() throws {
        let manifests = try Manifests.load()
        #expect(
            manifests.compactMap { $0.document["kind"].string }.sorted()
                == ["Deployment", "Namespace", "NetworkPolicy", "PodDisruptionBudget", "Service"])
        for (file, document) in manifests {
            #expect(document["apiVersion"].string != nil, "\(file) has no apiVersion")
            #expect(document["metadata"]["name"].string != nil, "\(file) has no name")
            #expect(document["metadata"]["labels"]["app.kubernetes.io/name"].string == "duo-relay", "\(file)")
        }
    }

    @Test("the Deployment runs two non-root replicas, read-only, without capabilities, under RuntimeDefault seccomp")
    func deploymentIsHardened() throws {
        let deployment = try Manifests.only("Deployment", in: Manifests.load())
        #expect(deployment["apiVersion"].string == "apps/v1")
        #expect(deployment["spec"]["replicas"].int == 2)
        let pod = deployment["spec"]["template"]["spec"]
        #expect(pod["automountServiceAccountToken"].bool == false)
        #expect(pod["securityContext"]["runAsNonRoot"].bool == true)
        #expect(pod["securityContext"]["seccompProfile"]["type"].string == "RuntimeDefault")
        let containers = pod["containers"].array
        #expect(containers.count == 1)
        let container = try #require(containers.first)
        let security = container["securityContext"]
        #expect(security["readOnlyRootFilesystem"].bool == true)
        #expect(security["allowPrivilegeEscalation"].bool == false)
        #expect(security["privileged"].bool != true)
        #expect(security["capabilities"]["drop"].strings == ["ALL"])
        #expect(!security["capabilities"]["add"].exists)
        // The user the image declares, so that both say the same.
        let imageUser = try Self.imageUser()
        #expect(pod["securityContext"]["runAsUser"].int == imageUser)
        #expect(security["runAsUser"].int == nil || security["runAsUser"].int == imageUser)
        for resource in ["requests", "limits"] {
            #expect(container["resources"][resource]["memory"].string != nil, "no memory \(resource)")
            #expect(container["resources"][resource]["cpu"].exists, "no cpu \(resource)")
        }
        #expect(container["args"].strings == ["serve", "--config", Self.configPath])
    }

    @Test("liveness is GET /healthz and readiness GET /readyz, on the port the relay listens on")
    func deploymentProbes() throws {
        let manifests = try Manifests.load()
        let deployment = try Manifests.only("Deployment", in: manifests)
        let container = deployment["spec"]["template"]["spec"]["containers"][0]
        let listen = try #require(Self.exampleConfiguration(Self.configMap)["listen"].string)
        let listenPort = try #require(listen.split(separator: ":").last.flatMap { Int($0) })
        #expect(listen.hasPrefix("0.0.0.0:") || listen.hasPrefix("[::]:"), "a pod must listen beyond loopback")

        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            let get = container[probe]["httpGet"]
            #expect(get["path"].string == path, "\(probe)")
            #expect(Self.containerPort(get["port"], of: container) == listenPort, "\(probe) probes another port")
        }
        let service = try Manifests.only("Service", in: manifests)
        let servicePort = service["spec"]["ports"][0]
        #expect(Self.containerPort(servicePort["targetPort"], of: container) == listenPort)
    }

    @Test("the pod gets longer to stop than the preStop pause plus the relay's shutdown grace")
    func deploymentStopsGracefully() throws {
        let deployment = try Manifests.only("Deployment", in: Manifests.load())
        let pod = deployment["spec"]["template"]["spec"]
        let grace = try Self.exampleConfiguration(Self.configMap)["server"]["shutdown_grace_s"].int ?? 10
        let preStop = pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"].strings
        let pause = preStop.first == "sleep" ? Int(preStop.last ?? "") ?? 0 : 0
        let termination = try #require(pod["terminationGracePeriodSeconds"].int)
        #expect(termination > pause + grace + 5, "\(termination) s for \(pause) s preStop and \(grace) s grace")
    }

    @Test("secrets reach the relay as NAME_FILE variables naming files of the documented Secret, and only that way")
    func deploymentSecretsComeAsFiles() throws {
        let manifests = try Manifests.load()
        let pod = try Manifests.only("Deployment", in: manifests)["spec"]["template"]["spec"]
        let container = pod["containers"][0]
        let secretNames = try Documentation.secretNames()
        let secretKeys = try Self.documentedSecretKeys()
        #expect(secretKeys.contains("RELAY_KEYS"), "the Kubernetes recipe's secretGenerator was not read")

        let volume = try #require(pod["volumes"].array.first { $0["secret"].exists })
        #expect(volume["secret"]["secretName"].string == "duo-relay-secrets")
        let mount = try #require(container["volumeMounts"].array.first { $0["name"].string == volume["name"].string })
        #expect(mount["readOnly"].bool == true)
        let directory = try #require(mount["mountPath"].string)

        let variables = container["env"].array
        #expect(variables.contains { $0["name"].string == "RELAY_KEYS_FILE" })
        var named: Set<String> = []
        for variable in variables {
            let name = try #require(variable["name"].string)
            #expect(name.hasSuffix("_FILE"), "\(name) is not a _FILE variable")
            #expect(secretNames.contains(String(name.dropLast("_FILE".count))), "\(name) names no secret")
            #expect(!variable["valueFrom"].exists, "\(name) copies a secret into the environment")
            let path = try #require(variable["value"].string)
            #expect(path.hasPrefix(directory + "/"), "\(name) points outside the secret volume")
            let key = URL(fileURLWithPath: path).lastPathComponent
            #expect(secretKeys.contains(key), "\(name): the Kubernetes recipe's Secret has no key \(key)")
            named.insert(key)
        }
        // Every key of the documented Secret is read by the relay (REDIS_PASSWORD by Redis too).
        #expect(named == secretKeys, "the Secret's keys \(secretKeys.sorted()) against the variables \(named.sorted())")
        #expect(!container["envFrom"].exists, "envFrom would put every secret in the environment")

        // The ConfigMap the kustomization generates from relay.json.
        let configVolume = try #require(pod["volumes"].array.first { $0["configMap"].exists })
        let kustomization = try Manifests.load(["deploy/kubernetes/kustomization.yaml"])[0].document
        let generated = try #require(
            kustomization["configMapGenerator"].array.first {
                $0["name"].string == configVolume["configMap"]["name"].string
            })
        #expect(generated["files"].strings == ["relay.json"])
        let configMount = try #require(
            container["volumeMounts"].array.first { $0["name"].string == configVolume["name"].string })
        #expect(configMount["mountPath"].string.map { $0 + "/relay.json" } == Self.configPath)
    }

    @Test("the kustomization applies the relay and its Redis and no Secret, so applying never overwrites a real one")
    func kustomizationHoldsNoSecret() throws {
        let kustomization = try Manifests.load(["deploy/kubernetes/kustomization.yaml"])
        let resources = try #require(kustomization.first?.document["resources"].strings)
        let expected = try Manifests.files().map { String($0.dropFirst("deploy/kubernetes/".count)) }
        #expect(Set(resources) == Set(expected + ["redis/redis.yaml", "redis/networkpolicy.yaml"]))
        #expect(!kustomization[0].document["secretGenerator"].exists)
        for (file, document) in try Manifests.load(resources.map { "deploy/kubernetes/" + $0 }) {
            #expect(document["kind"].string != "Secret", "\(file) holds a Secret")
        }
        // Redis reads its password from the same Secret, under a key the documented generator makes.
        let redis = try Manifests.load(["deploy/kubernetes/redis/redis.yaml"])
        let redisDeployment = try Manifests.only("Deployment", in: redis)
        let secretVolume = try #require(
            redisDeployment["spec"]["template"]["spec"]["volumes"].array.first { $0["secret"].exists })
        #expect(secretVolume["secret"]["secretName"].string == "duo-relay-secrets")
        #expect(try Self.documentedSecretKeys().contains("REDIS_PASSWORD"))
        let configuration = try Self.exampleConfiguration(Self.configMap)
        #expect(configuration["limits_store"]["url"].string == "redis://duo-relay-redis:6379/0")
        #expect(try Manifests.only("Service", in: redis)["metadata"]["name"].string == "duo-relay-redis")
    }

    @Test("the pods carry the Prometheus annotations of the metrics port, scraped as the rules' job")
    func podsAreScraped() throws {
        let pod = try Manifests.only("Deployment", in: Manifests.load())["spec"]["template"]
        let annotations = pod["metadata"]["annotations"]
        #expect(annotations["prometheus.io/scrape"].string == "true")
        let metrics = try #require(
            pod["spec"]["containers"][0]["ports"].array.first { $0["name"].string == "metrics" })
        #expect(annotations["prometheus.io/port"].string == metrics["containerPort"].int.map(String.init))
        let listen = try #require(Self.exampleConfiguration(Self.configMap)["metrics_listen"].string)
        #expect(listen.hasSuffix(":" + (annotations["prometheus.io/port"].string ?? "?")))
        for example in [
            "deploy/prometheus/prometheus.example.yml", "deploy/prometheus/prometheus.kubernetes.example.yml",
        ] {
            let config = try Manifests.load([example])
            let jobs = config[0].document["scrape_configs"].array.compactMap { $0["job_name"].string }
            #expect(jobs == ["duo-relay"], "\(example)")
        }
        #expect(try Repository.text("deploy/prometheus/alerts.rules.yml").contains(#"up{job="duo-relay"}"#))
    }

    /// The keys of the Secret that the Kubernetes recipe (docs/operations/containers.md) generates: its secretGenerator's files.
    static func documentedSecretKeys() throws -> Set<String> {
        let recipe = Documentation.section("Kubernetes", of: try Repository.text("docs/operations/containers.md"))
        let generator = try #require(recipe.range(of: "secretGenerator:"))
        var keys: Set<String> = []
        for line in recipe[generator.upperBound...].split(separator: "\n") {
            let item = line.trimmingCharacters(in: .whitespaces)
            if item == "EOF" { break }
            if item.hasPrefix("- secrets/") { keys.insert(String(item.dropFirst("- secrets/".count))) }
        }
        return keys
    }

    @Test("the Service and the PodDisruptionBudget select the Deployment's pods; at least one stays up")
    func serviceAndBudgetSelectThePods() throws {
        let manifests = try Manifests.load()
        let deployment = try Manifests.only("Deployment", in: manifests)
        let labels = deployment["spec"]["template"]["metadata"]["labels"]
        let service = try Manifests.only("Service", in: manifests)
        let budget = try Manifests.only("PodDisruptionBudget", in: manifests)
        #expect(budget["apiVersion"].string == "policy/v1")
        #expect(budget["spec"]["minAvailable"].int == 1)
        for (kind, selector) in [
            ("Service", service["spec"]["selector"]),
            ("PodDisruptionBudget", budget["spec"]["selector"]["matchLabels"]),
            ("Deployment", deployment["spec"]["selector"]["matchLabels"]),
        ] {
            #expect(!selector.keys.isEmpty, "\(kind) selects nothing")
            for key in selector.keys { #expect(labels[key].string == selector[key].string, "\(kind): \(key)") }
        }
    }

    // MARK: - Container image

    @Test("the image builds in two stages: static Swift runtime on swift:6.3-bookworm, run on debian:bookworm-slim")
    func dockerfileStages() throws {
        let file = Dockerfile(try Repository.text(Self.dockerfile))
        #expect(file.stages.count == 2)
        let build = try #require(file.stages.first)
        let runtime = try #require(file.stages.last)
        #expect(build.base == "swift:6.3-bookworm")
        #expect(runtime.base == "debian:bookworm-slim")
        #expect(
            build.all("RUN").contains {
                $0.arguments.contains("swift build -c release --static-swift-stdlib --product duo-relay")
            })
        let copied = runtime.all("COPY").map(\.arguments)
        #expect(copied.contains { $0.hasPrefix("--from=\(build.name ?? "?") ") && $0.hasSuffix(" \(Self.binary)") })
    }

    @Test("the image runs as a numeric non-root user, exposes 8787 and serves its mounted configuration")
    func dockerfileRuntime() throws {
        let runtime = try #require(Dockerfile(try Repository.text(Self.dockerfile)).stages.last)
        let user = try Self.imageUser()
        #expect(user != 0)
        #expect(runtime.all("EXPOSE").map(\.arguments) == ["8787"])
        let entrypoint = try #require(runtime.all("ENTRYPOINT").last)
        #expect(try JSONNode(parsing: entrypoint.arguments).strings == ["duo-relay"])
        let command = try #require(runtime.all("CMD").last)
        #expect(try JSONNode(parsing: command.arguments).strings == ["serve", "--config", Self.configPath])
    }

    @Test("the runtime stage installs exactly the shared libraries the binary links, and the CA roots")
    func dockerfileRuntimePackages() throws {
        let file = Dockerfile(try Repository.text(Self.dockerfile))
        let runtime = try #require(file.stages.last)
        #expect(
            runtime.aptPackages == [
                "libssl3", "libuv1", "libnghttp2-14", "libjemalloc2", "libhiredis0.14", "libcurl4",
                "ca-certificates",
            ])
    }

    @Test("the build stage installs every development package that Package.swift's system libraries name")
    func dockerfileBuildPackages() throws {
        let build = try #require(Dockerfile(try Repository.text(Self.dockerfile)).stages.first)
        let manifest = try Repository.text("Package.swift")
        var providers: Set<String> = []
        for match in manifest.matches(of: try Regex(#"\.apt\(\[([^\]]*)\]\)"#)) {
            guard let list = match.output[1].substring else { continue }
            providers.formUnion(
                list.split(separator: ",").map { $0.trimmingCharacters(in: .init(charactersIn: "\" ")) })
        }
        #expect(providers.count == 6, "Package.swift's providers were not read: \(providers)")
        #expect(providers.isSubset(of: build.aptPackages), "missing: \(providers.subtracting(build.aptPackages))")
    }

    @Test("the build context holds only what the build copies, and never a key file")
    func dockerignore() throws {
        let lines = try Repository.text("deploy/container/Dockerfile.dockerignore").split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
        #expect(lines.first == "*", "everything is excluded first")
        let included = lines.filter { $0.hasPrefix("!") }.map { String($0.dropFirst()) }
        #expect(Set(included) == ["Package.swift", "Sources/", "Plugins/", "Benchmarks/", "Tests/"])
        #expect(lines.contains("**/*.p8"))
        let build = try #require(Dockerfile(try Repository.text(Self.dockerfile)).stages.first)
        for copy in build.all("COPY") {
            let source = try #require(copy.arguments.split(separator: " ").first.map(String.init))
            #expect(included.contains { $0 == source || $0 == source + "/" }, "COPY \(source) is excluded")
        }
    }

    // MARK: - Reverse proxy

    @Test("nginx overwrites X-Forwarded-For with the peer address, the header the relay is told to read")
    func nginxForwardsTheClientAddress() throws {
        let directives = try Self.nginxDirectives()
        let forwarded = directives.filter { $0.hasPrefix("proxy_set_header X-Forwarded-For ") }
        #expect(forwarded == ["proxy_set_header X-Forwarded-For $remote_addr"])
        #expect(!directives.contains { $0.contains("$proxy_add_x_forwarded_for") }, "appending keeps forged entries")
        let header = try Self.exampleConfiguration(Self.systemdConfiguration)["ip_limit"]["client_ip_header"].string
        #expect(header?.lowercased() == "x-forwarded-for")
    }

    @Test("nginx: 16k bodies, keep-alive to the relay it expects, timeouts that fit the relay's")
    func nginxFitsTheRelay() throws {
        let directives = try Self.nginxDirectives()
        let configuration = try Self.exampleConfiguration(Self.systemdConfiguration)
        #expect(directives.contains("client_max_body_size 16k"))
        #expect(directives.contains("server \(configuration["listen"].string ?? "?")"), "upstream is not the relay")
        #expect(directives.contains { $0.hasPrefix("keepalive ") })
        #expect(directives.contains("proxy_http_version 1.1"))
        #expect(directives.contains(#"proxy_set_header Connection """#))
        #expect(directives.contains("proxy_next_upstream off"))
        let apnsTimeout = (configuration["apns"]["timeout_ms"].int ?? 10_000) / 1000
        #expect(try Self.seconds(of: "proxy_read_timeout", in: directives) > apnsTimeout)
        // nginx must drop an idle upstream connection before the relay does, or reuse a closed one.
        #expect(
            try Self.seconds(of: "keepalive_timeout", in: directives)
                < configuration["server"]["connection_timeout_s"].int ?? 30)
    }

    @Test(
        "nginx -t accepts the example", .enabled(if: Tool.isAvailable(nginxBinary) && Tool.isAvailable(openssl)))
    func nginxAcceptsTheExample() throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let key = scratch.url.appendingPathComponent("privkey.pem").path
        let certificate = scratch.url.appendingPathComponent("fullchain.pem").path
        let made = try Tool.run(
            Self.openssl,
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                "-subj", "/CN=relay.example.org", "-keyout", key, "-out", certificate,
            ])
        try #require(made.status == 0, "\(made.errors)")
        let site = try Repository.text(Self.nginx)
            .replacingOccurrences(of: "/etc/ssl/duo-relay/", with: scratch.url.path + "/")
        let sitePath = try scratch.write(site, to: "site.conf").path
        let temporary = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
            .map { "\($0)_temp_path \(scratch.url.path)/\($0);" }.joined(separator: " ")
        let main = try scratch.write(
            "pid \(scratch.url.path)/nginx.pid; error_log stderr; events {}\nhttp { \(temporary) include \(sitePath); }\n",
            to: "nginx.conf")
        let result = try Tool.run(Self.nginxBinary, ["-t", "-p", scratch.url.path, "-c", main.path, "-e", "stderr"])
        #expect(result.status == 0, "\(result.errors)")
        #expect(!result.errors.contains("[warn]"), "\(result.errors)")
    }

    @Test(
        "caddy adapts the Caddyfile without a warning; it proxies to the relay as the relay expects",
        .enabled(if: Tool.isAvailable(caddyBinary)))
    func caddyAdaptsTheExample() throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let home = scratch.url.path
        let result = try Tool.run(
            Self.caddyBinary, ["adapt", "--config", Repository.url(Self.caddyfile).path, "--adapter", "caddyfile"],
            environment: ["HOME": home, "XDG_CONFIG_HOME": home, "XDG_DATA_HOME": home])
        try #require(result.status == 0, "\(result.errors)")
        #expect(!result.errors.contains(#""level":"warn""#), "\(result.errors)")
        let objects = try JSONNode(parsing: result.output).allObjects
        let configuration = try Self.exampleConfiguration(Self.systemdConfiguration)

        let proxies = objects.filter { $0["handler"].string == "reverse_proxy" }
        #expect(proxies.count == 1)
        let proxy = try #require(proxies.first)
        #expect(proxy["upstreams"][0]["dial"].string == configuration["listen"].string)
        // Without trusted_proxies, Caddy replaces a client's X-Forwarded-For with the peer address.
        #expect(!proxy["trusted_proxies"].exists)
        #expect(!proxy["headers"]["request"].exists, "request headers are rewritten")
        let keepAlive = proxy["transport"]["keep_alive"]["idle_timeout"].int ?? Int.max
        #expect(keepAlive < (configuration["server"]["connection_timeout_s"].int ?? 30) * 1_000_000_000)
        let wait = proxy["transport"]["response_header_timeout"].int ?? 0
        #expect(wait > (configuration["apns"]["timeout_ms"].int ?? 10_000) * 1_000_000)

        #expect(objects.contains { $0["handler"].string == "request_body" && $0["max_size"].int == 16_384 })
        #expect(
            objects.contains {
                $0["handler"].string == "static_response" && $0["status_code"].int == 413
                    && $0["body"].string == #"{"error":"too_large"}"#
            })
    }

    // MARK: - Everything

    @Test("no file under deploy/, nor any operations document, holds key material")
    func noKeyMaterial() throws {
        let files = Repository.allFiles(under: "deploy") + (try Documentation.operationsDocuments().map(\.path))
        #expect(files.count > 10)
        for file in files {
            #expect(try Self.keyMaterial(in: Repository.text(file)).isEmpty, "\(file)")
        }
    }

    // MARK: - Helpers

    /// The relay configuration in an example: a JSON file, or the ConfigMap's `relay.json`.
    static func exampleConfiguration(_ path: String) throws -> JSONNode {
        if path.hasSuffix(".json") { return try JSONNode(parsing: Repository.text(path)) }
        let configMap = try Manifests.only("ConfigMap", in: Manifests.load())
        return try JSONNode(parsing: try #require(configMap["data"]["relay.json"].string))
    }

    /// Runs `systemd-analyze verify` on `unit`, its binary swapped for a stand-in that exists
    /// (verify checks that ExecStart's program does).
    /// With `socket`, the socket unit is verified too, beside its service.
    static func verifyUnit(_ unit: String, socket: String? = nil) throws -> ToolResult {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let stub = try scratch.write("#!/bin/sh\nexit 0\n", to: "duo-relay", mode: 0o755)
        let file = try scratch.write(
            unit.replacingOccurrences(of: binary, with: stub.path), to: "duo-relay.service")
        var files = [file.path]
        if let socket { files.insert(try scratch.write(socket, to: "duo-relay.socket").path, at: 0) }
        return try Tool.run(systemdAnalyze, ["verify", "--man=no"] + files, in: scratch.url)
    }

    /// `NAME=value` lines of an environment file, comments skipped.
    static func assignments(in text: String) -> [String: String] {
        var found: [String: String] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { found[parts[0].trimmingCharacters(in: .whitespaces)] = parts[1] }
        }
        return found
    }

    /// The image's `USER`, which must be numeric (`uid` or `uid:gid`).
    static func imageUser() throws -> Int {
        let runtime = try #require(Dockerfile(try Repository.text(dockerfile)).stages.last)
        let user = try #require(runtime.all("USER").last?.arguments)
        return try #require(user.split(separator: ":").first.flatMap { Int($0) }, "USER \(user) is not numeric")
    }

    /// A probe's or a Service's port, by number or by the container port's name.
    static func containerPort(_ port: JSONNode, of container: JSONNode) -> Int? {
        if let number = port.int { return number }
        return container["ports"].array.first { $0["name"].string == port.string }?["containerPort"].int
    }

    /// The nginx example's directives, one per statement, comments dropped and `;` removed.
    static func nginxDirectives() throws -> [String] {
        try Repository.text(nginx).split(separator: "\n").compactMap { line in
            let code = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let statement = code.trimmingCharacters(in: .whitespaces)
            guard statement.hasSuffix(";") else { return nil }
            return String(statement.dropLast())
        }
    }

    /// The seconds that an nginx time directive (`name 30s;`) sets.
    static func seconds(of name: String, in directives: [String]) throws -> Int {
        let directive = try #require(directives.first { $0.hasPrefix(name + " ") }, "\(name) is not set")
        return try #require(Int(directive.dropFirst(name.count + 1).replacingOccurrences(of: "s", with: "")))
    }

    /// Text that looks like a secret: a PEM private key, or a run of base64 characters long enough to
    /// be a relay key (32 bytes are 43 characters) or a line of a PEM body, mixing upper case, lower
    /// case and digits as random bytes do (a long metric or file name does not).
    static func keyMaterial(in text: String) throws -> [String] {
        var found: [String] = []
        if text.contains("PRIVATE KEY-----") { found.append("a PEM private key") }
        for match in text.matches(of: try Regex("[A-Za-z0-9_+/-]{40,}")) {
            let run = text[match.range]
            if run.contains(where: \.isUppercase) && run.contains(where: \.isLowercase)
                && run.contains(where: \.isNumber)
            {
                found.append(String(run.prefix(6)) + "…")
            }
        }
        return found
    }
}
