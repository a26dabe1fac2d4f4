import Foundation

extension ContainerTestRun {
    /// 3. Kubernetes: the documented kustomization, rendered by `kubectl kustomize` and played by `podman kube play`.
    func checkKubernetes() throws(RecipeFailure) {
        say("3. the documented kustomization: kubectl kustomize, then podman kube play (Secret, Redis, relay)")
        let k8s = work + "/k8s"
        let production = k8s + "/duo-relay-production"
        try makeDirectory(k8s + "/home")
        do {
            try FileManager.default.createSymbolicLink(
                atPath: k8s + "/duo-relay", withDestinationPath: work + "/checkout")
            try FileManager.default.copyItem(
                atPath: pki + "/AuthKey_KEYID12345.p8", toPath: k8s + "/home/AuthKey_KEYID12345.p8")
        } catch { throw .check("kubernetes: the operator's directory") }
        try write(ContainerRecipeEdits.kubernetesBlock(read(try block("kubernetes", 1))), to: work + "/kubernetes.sh")
        let applied = work + "/applied.yaml"
        let recipe = try run(
            "bash", ["-euo", "pipefail", work + "/kubernetes.sh"], directory: k8s,
            environment: ["HOME": k8s + "/home", "APPLIED": applied])
        try expect(recipe.succeeded, "kubernetes: the documented recipe", detail: recipe.tail(5))
        let rendering = read(applied)
        try expect(!rendering.contains("REPLACE_ME"), "kubernetes: what is applied holds placeholders")
        let operatorDocuments = KustomizeDocuments(rendering)
        try expect(operatorDocuments.count("Secret") == 1, "kubernetes: what is applied holds not exactly one Secret")

        // The podman layer on top of the operator's kustomization.
        redisAddress = try unreservedAddress()
        guard let configMap = operatorDocuments.document("ConfigMap", "duo-relay-config", generated: true),
            let relayJSON = KustomizeDocuments.configMapFile(configMap, key: "relay.json"),
            let played = ContainerRelayConfig.edited(
                Data(relayJSON.utf8),
                ContainerRelayConfig.atSimulator(origin) + [
                    (["limits_store", "url"], "redis://\(redisAddress):6379/0")
                ])
        else { throw .check("kubernetes: the ConfigMap's relay.json is not JSON") }
        let layer = work + "/k8s-play"
        try makeDirectory(layer)
        try write(String(decoding: played, as: UTF8.self), to: layer + "/relay.json")
        try write(read(pki + "/ca.pem"), to: layer + "/ca.pem")
        let kustomization = PodmanKustomization(
            redisImage: redisImage, relayPort: try freePort(), relayMetricsPort: try freePort(),
            redisPort: try freePort())
        try write(kustomization.kustomization, to: layer + "/kustomization.yaml")
        try write(kustomization.relayPatch, to: layer + "/relay.patch.yaml")
        try write(kustomization.redisPatch, to: layer + "/redis.patch.yaml")
        let rendered = try run("kubectl", ["kustomize", layer])
        try expect(
            rendered.succeeded, "kubernetes: kubectl kustomize of the podman layer: \(rendered.lastErrorLine)")
        let documents = KustomizeDocuments(rendered.output)
        func document(_ kind: String, _ name: String, generated: Bool = false) throws(RecipeFailure)
            -> KustomizeDocuments.Document
        {
            guard let found = documents.document(kind, name, generated: generated) else {
                throw .check("kubernetes: the rendering has no \(kind) \(name)")
            }
            return found
        }
        let secret = try document("Secret", "duo-relay-secrets", generated: true)
        let relayConfig = try document("ConfigMap", "duo-relay-config", generated: true)
        let redisConfig = try document("ConfigMap", "duo-relay-redis-config", generated: true)

        // podman makes a volume of each emptyDir, ConfigMap and the Secret, and its kube network: removed if new.
        for volume in ["tmp", "data", "config", relayConfig.name, redisConfig.name, secret.name]
        where !(try podman(["volume", "exists", volume]).succeeded) {
            newVolumes.append(volume)
        }
        kubeNetworkExisted = try podman(["network", "exists", Self.kubeNetwork]).succeeded
        let secretFile = work + "/secret.yaml"
        try write(secret.text, to: secretFile)
        secretName = secret.name
        let playedSecret = try podman(["kube", "play", secretFile])
        try expect(playedSecret.succeeded, "kubernetes: kube play of the Secret", detail: playedSecret.tail(20))
        // podman 4.3 writes a secret volume's files base64-encoded (it does not decode `data`): the same Secret
        // stored again with its values as they are.
        let names = ["RELAY_KEYS", "APNS_KEY_PRODUCTION", "APNS_KEY_ID_PRODUCTION", "APNS_TEAM_ID", "REDIS_PASSWORD"]
        let secretFiles = ((try? FileManager.default.contentsOfDirectory(atPath: production + "/secrets")) ?? names)
            .sorted().map { (name: $0, contents: read(production + "/secrets/" + $0)) }
        try write(KustomizeDocuments.rawSecret(name: secret.name, files: secretFiles), to: work + "/raw-secret.yaml")
        let removed = try podman(["secret", "rm", secret.name]).succeeded
        try expect(removed, "kubernetes: storing the Secret's values for podman")
        let stored = try podman(["secret", "create", secret.name, work + "/raw-secret.yaml"]).succeeded
        try expect(stored, "kubernetes: storing the Secret's values for podman")

        let redisPlay = work + "/redis-play.yaml"
        try write(
            KustomizeDocuments.joined([
                redisConfig, try document("Service", "duo-relay-redis"), try document("Deployment", "duo-relay-redis"),
            ]), to: redisPlay)
        self.played.append(redisPlay)
        let redisPlayed = try podman(["kube", "play", "--network", "podman", "--ip", redisAddress, redisPlay])
        try expect(redisPlayed.succeeded, "kubernetes: kube play of Redis", detail: redisPlayed.tail(20))
        let relayPlay = work + "/relay-play.yaml"
        try write(
            KustomizeDocuments.joined([
                relayConfig, try document("Service", "duo-relay"), try document("Deployment", "duo-relay"),
            ]), to: relayPlay)
        self.played.append(relayPlay)
        let relayPlayed = try podman(["kube", "play", "--network", "podman", relayPlay])
        try expect(relayPlayed.succeeded, "kubernetes: kube play of the relay", detail: relayPlayed.tail(20))

        let podRelay = "http://127.0.0.1:\(kustomization.relayPort)"
        let container = try firstContainer(named: "duo-relay-pod-0-duo-relay")
        try expect(!container.isEmpty, "kubernetes: kube play started no relay container")
        try expect(
            RecipeHTTP.answers200(podRelay + "/healthz"), "kubernetes: the pod's /healthz (livenessProbe)",
            detail: logTail(container, 3))
        try processIsConfined(container, check: "kubernetes")
        try expect(
            RecipeHTTP.answers200(podRelay + "/readyz"),
            "kubernetes: the pod's /readyz (readinessProbe): \(RecipeHTTP.get(podRelay + "/readyz")?.text ?? "")")
        let ready = RecipeHTTP.get(podRelay + "/readyz")?.text ?? ""
        try expect(
            ready.contains("\"limits\":\"shared\""),
            "kubernetes: the relay does not count in the kustomization's Redis: \(ready)")

        // Redis has the Secret's password, and it is on no command line: redis-server replaced the shell that
        // read it (exec), and neither its arguments nor the container's definition hold it.
        // The file's value without its last newline, as the shell's `$(cat FILE)` reads it.
        var password = read(production + "/secrets/REDIS_PASSWORD")
        while password.hasSuffix("\n") { password.removeLast() }
        let redisContainer = try firstContainer(named: "duo-relay-redis-pod-0-redis")
        try expect(!redisContainer.isEmpty, "kubernetes: kube play started no Redis container")
        let commandLine = read("/proc/\(try pid(of: redisContainer))/cmdline").replacingOccurrences(of: "\0", with: " ")
        try expect(commandLine.hasPrefix("redis-server"), "kubernetes: redis-server is not the container's process")
        try expect(
            !ContainerRelayOutput.holdsASecret(commandLine, secrets: [password]),
            "kubernetes: the Redis password is on its command line")
        let definition = try podman(["inspect", redisContainer]).output
        try expect(
            !ContainerRelayOutput.holdsASecret(definition, secrets: [password]),
            "kubernetes: the Redis container's definition holds the password")
        let redisArguments = ["-h", "127.0.0.1", "-p", String(kustomization.redisPort), "ping"]
        let anonymous = try run("redis-cli", redisArguments)
        try expect(
            (anonymous.output + anonymous.error).trimmingCharacters(in: .whitespacesAndNewlines) != "PONG",
            "kubernetes: Redis answers without the password")
        let authenticated = try run("redis-cli", redisArguments, environment: ["REDISCLI_AUTH": password])
        try expect(
            (authenticated.output + authenticated.error).trimmingCharacters(in: .whitespacesAndNewlines) == "PONG",
            "kubernetes: Redis refuses the Secret's password")

        let token = Self.randomHex(32)
        let grant = try grant(podRelay, token: token, check: "kubernetes")
        secretsGiven += [token, grant, password]
        try pushDelivered(podRelay, grant: grant, check: "kubernetes")
        try metricsClean(
            "http://127.0.0.1:\(kustomization.relayMetricsPort)/metrics", check: "kubernetes", sharedStore: true)
        try expect(try podman(["pod", "stop", "-t", "30", "duo-relay-pod-0"]).succeeded, "kubernetes: podman pod stop")
        let exit = try podman(["inspect", "-f", "{{.State.ExitCode}}", container]).output
        try expect(
            exit.trimmingCharacters(in: .whitespacesAndNewlines) == "0",
            "kubernetes: the relay did not exit 0 on SIGTERM")
        let logs = try podman(["logs", container])
        try logsClean(logs.output + logs.error, check: "kubernetes")
        for file in self.played {
            try expect(try podman(["kube", "down", file]).succeeded, "kubernetes: podman kube down")
        }
        self.played = []
        say(
            "kubernetes: Secret from files, Redis with its password from the Secret's file (on no command line), "
                + "relay: confined as its securityContext says, probes 200, limits shared, push delivered, exit 0")
    }

    /// The ID of the running container of exactly that name, or "".
    func firstContainer(named name: String) throws(RecipeFailure) -> String {
        let listed = try podman(["ps", "-q", "--filter", "name=^\(name)$"]).output
        return listed.split(separator: "\n").first.map(String.init) ?? ""
    }

    /// An address on podman's default network for Redis that no container holds and the network's allocator has not
    /// reserved: CNI's host-local allocator keeps one file per address it handed out (a container that was not torn
    /// down cleanly leaves its file behind), and `kube play --ip` with a reserved address fails.
    func unreservedAddress() throws(RecipeFailure) -> String {
        let prefix = gateway.split(separator: ".").dropLast().joined(separator: ".")
        var inUse = Set((try? FileManager.default.contentsOfDirectory(atPath: "/var/lib/cni/networks/podman")) ?? [])
        let containers = try podman(["ps", "-a", "-q"]).output.split(whereSeparator: \.isNewline).map(String.init)
        if !containers.isEmpty {
            let addresses = try podman(
                ["inspect", "--type", "container", "--format", "{{.NetworkSettings.IPAddress}}"] + containers)
            inUse.formUnion(addresses.output.split(whereSeparator: \.isNewline).map(String.init))
        }
        let free = (100...249).map { "\(prefix).\($0)" }.filter { !inUse.contains($0) }
        guard let address = free.randomElement() else {
            throw .check("kubernetes: no address left on podman's network for Redis")
        }
        return address
    }
}
