import Foundation
import Testing

@testable import RecipeRunner

/// The files container-test makes and the documents it finds: the kustomize rendering's documents, the podman
/// layer, the relay.json edits, the documented run block as run here, the base images' keys, the pair's pushes.
@Suite struct ContainerTestFilesTests {
    @Test func theRenderingsDocumentsAreFoundByKindAndName() throws {
        let documents = KustomizeDocuments(ContainerTestFixtures.rendering)
        #expect(
            documents.documents.map(\.kind) == [
                "Namespace", "ConfigMap", "ConfigMap", "Secret", "Service", "Service", "Deployment", "Deployment",
            ])
        #expect(documents.count("Secret") == 1)
        // Generated names carry kustomize's hash; the others are exact.
        #expect(
            documents.document("Secret", "duo-relay-secrets", generated: true)?.name == "duo-relay-secrets-gm9fkkb82d")
        #expect(documents.document("Secret", "duo-relay-secrets") == nil)
        #expect(
            documents.document("ConfigMap", "duo-relay-config", generated: true)?.name == "duo-relay-config-gh5hhb2766")
        #expect(
            documents.document("ConfigMap", "duo-relay-redis-config", generated: true)?.name
                == "duo-relay-redis-config-m4m497kt68")
        #expect(documents.document("Service", "duo-relay")?.text.contains("targetPort: http") == true)
        #expect(documents.document("Deployment", "duo-relay")?.text.contains("replicas: 2") == true)
        #expect(documents.document("Deployment", "duo-relay-redis")?.name == "duo-relay-redis")
        #expect(documents.document("Deployment", "duo-relay-re") == nil)
        #expect(documents.document("Service", "duo-relay", generated: false)?.kind == "Service")
        // Joined for one kube play, each document whole, `---` between them.
        let joined = KustomizeDocuments.joined([
            try #require(documents.document("Service", "duo-relay-redis")),
            try #require(documents.document("Deployment", "duo-relay-redis")),
        ])
        #expect(KustomizeDocuments(joined).documents.map(\.name) == ["duo-relay-redis", "duo-relay-redis"])
        #expect(joined.components(separatedBy: "\n---\n").count == 2)
    }

    @Test func theConfigMapsRelayJSONIsTheDocumentsFile() throws {
        let documents = KustomizeDocuments(ContainerTestFixtures.rendering)
        let configMap = try #require(documents.document("ConfigMap", "duo-relay-config", generated: true))
        let json = try #require(KustomizeDocuments.configMapFile(configMap, key: "relay.json"))
        let expected = try ContainerTestReadingsTests.repositoryFile("deploy/kubernetes/relay.json")
        #expect(json == expected)
        #expect(KustomizeDocuments.configMapFile(configMap, key: "ca.pem") == nil)
    }

    @Test func theRawSecretHoldsTheFilesAsTheyAre() {
        let secret = KustomizeDocuments.rawSecret(
            name: "duo-relay-secrets-gm9fkkb82d",
            files: [("APNS_KEY_ID_PRODUCTION", "KEYID12345"), ("RELAY_KEYS", "{\"1\":\"abc\"}\n")])
        #expect(
            secret == """
                apiVersion: v1
                kind: Secret
                metadata:
                  name: duo-relay-secrets-gm9fkkb82d
                data:
                  APNS_KEY_ID_PRODUCTION: |-
                    KEYID12345
                  RELAY_KEYS: |-
                    {"1":"abc"}


                """)
    }

    @Test func thePodmanLayerPatchesOnlyWhatPodmanNeeds() {
        let layer = PodmanKustomization(
            redisImage: "localhost/duo-deploy-redis:0123456789abcdef", relayPort: 21000, relayMetricsPort: 21001,
            redisPort: 21002)
        #expect(layer.kustomization.contains("bases: [../k8s/duo-relay-production]"))
        #expect(
            layer.kustomization.contains(
                "{ name: docker.io/library/redis, newName: localhost/duo-deploy-redis, newTag: \"0123456789abcdef\" }"))
        #expect(layer.kustomization.contains("newName: localhost/duo-relay, newTag: \"1.0.0\""))
        #expect(layer.relayPatch.contains("path: /spec/replicas, value: 1 }"))
        #expect(layer.relayPatch.contains("ports/0/hostPort, value: 21000 }"))
        #expect(layer.relayPatch.contains("ports/1/hostPort, value: 21001 }"))
        #expect(layer.redisPatch.contains("ports/0/hostPort, value: 21002 }"))
        #expect(layer.redisPatch.components(separatedBy: "hostIP, value: 127.0.0.1").count == 2)
    }

    @Test func theRelayJSONEditsKeepEverythingElse() throws {
        let template = Data(try ContainerTestReadingsTests.repositoryFile("deploy/container/relay.json").utf8)
        let edited = try #require(
            ContainerRelayConfig.edited(template, ContainerRelayConfig.atSimulator("https://10.88.0.1:24000")))
        let object = try #require(try JSONSerialization.jsonObject(with: edited) as? [String: Any])
        let original = try #require(try JSONSerialization.jsonObject(with: template) as? [String: Any])
        let apns = try #require(object["apns"] as? [String: Any])
        #expect(apns["production_origin"] as? String == "https://10.88.0.1:24000")
        #expect(apns["ca_file"] as? String == "/etc/duo-relay/ca.pem")
        #expect(apns["topic"] as? String == "app.openduo.pocket")
        #expect(Set(object.keys) == Set(original.keys))
        #expect(ContainerRelayConfig.number(edited, ["server", "shutdown_grace_s"]) == 10)
        #expect(String(decoding: edited, as: UTF8.self).contains("\"https://10.88.0.1:24000\""))

        let pair = try #require(
            ContainerRelayConfig.edited(edited, ContainerRelayConfig.pair(redis: "redis://10.88.0.200:6379/0")))
        let pairObject = try #require(try JSONSerialization.jsonObject(with: pair) as? [String: Any])
        let store = try #require(pairObject["limits_store"] as? [String: String])
        #expect(store == ["kind": "redis", "url": "redis://10.88.0.200:6379/0", "on_failure": "refuse"])
        let ip = try #require(pairObject["ip_limit"] as? [String: Any])
        #expect(ip["client_ip_header"] is NSNull)
        #expect((ip["requests"] as? NSNumber)?.intValue == 1000)
        #expect((ip["period_s"] as? NSNumber)?.intValue == 10)
        #expect(String(decoding: pair, as: UTF8.self).contains("\"client_ip_header\" : null"))
        #expect(ContainerRelayConfig.edited(Data("not json".utf8), []) == nil)
        #expect(ContainerRelayConfig.string(Data("{\"1\":\"key-one\"}".utf8), "1") == "key-one")
    }

    /// The operations documents' `container` blocks in order.
    static func containerBlocks() throws -> [String] {
        let root = ContainerTestReadingsTests.root.path
        let document = try RecipeExtract.documents(in: root).map(ContainerTestReadingsTests.repositoryFile)
            .joined(separator: "\n")
        var blocks: [String] = []
        var lines = document.split(separator: "\n", omittingEmptySubsequences: false)[...]
        while let mark = lines.firstIndex(where: { $0.hasPrefix("<!-- run: container (") }) {
            let body = lines[(mark + 2)...].prefix { $0 != "```" }
            blocks.append(body.map { $0 + "\n" }.joined())
            lines = lines[(mark + 2 + body.count)...]
        }
        return blocks
    }

    @Test func theDocumentedRunBlockChangesOnlyPortsLimitsAndTheCA() throws {
        let blocks = try Self.containerBlocks()
        #expect(blocks.count == 3)
        let block = blocks[1]
        let ulimits = ContainerRecipeEdits.ulimitOptions(files: 20000, processes: 4096)
        #expect(ulimits == "--ulimit nofile=20000:20000 --ulimit nproc=4096:4096")
        let run = try #require(
            ContainerRecipeEdits.runBlock(
                block, port: 21000, metricsPort: 21001, ulimits: ulimits, caFile: "/tmp/w/pki/ca.pem"))
        #expect(run.contains("-p 127.0.0.1:21000:8787 -p 127.0.0.1:21001:9787"))
        #expect(!run.contains("8787:8787") && !run.contains("9787:9787"))
        // Both the dry run and the run get the limits and the CA.
        #expect(run.components(separatedBy: "--ulimit core=0 \(ulimits)").count == 3)
        #expect(run.components(separatedBy: "-v \"/tmp/w/pki/ca.pem:/etc/duo-relay/ca.pem:ro\"").count == 3)
        #expect(run.contains("duo-relay:1.0.0 check --config /etc/duo-relay/relay.json"))
        // A block without the port it changes is refused, not run unchanged.
        #expect(
            ContainerRecipeEdits.runBlock(blocks[0], port: 1, metricsPort: 2, ulimits: ulimits, caFile: "/c") == nil)
    }

    @Test func theKubernetesBlockRendersWhatApplyWouldApply() {
        let block = ContainerRecipeEdits.kubernetesBlock("kubectl apply -k .\n")
        #expect(
            block.hasPrefix(
                "kubectl() { if [ \"$1 $2\" = \"apply -k\" ]; then command kubectl kustomize \"$3\" >\"$APPLIED\";"))
        #expect(block.hasSuffix("fi; }\nkubectl apply -k .\n"))
    }

    @Test func theLimitsAskedForAreWhatTheMachineGrants() {
        #expect(ContainerRecipeEdits.files(hardLimit: 20000) == 20000)
        #expect(ContainerRecipeEdits.files(hardLimit: nil) == 65536)
        #expect(ContainerRecipeEdits.processes(hardLimit: 96368) == 4096)
        #expect(ContainerRecipeEdits.processes(hardLimit: 1000) == 1000)
        #expect(ContainerRecipeEdits.processes(hardLimit: nil) == 4096)
        #expect(
            ContainerRecipeEdits.containersConf(files: 20000, processes: 4096) == """
                [containers]
                default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
                [engine]
                runtime = "runc"

                """)
    }

    @Test func aBaseImagesKeyChangesWithItsRecipeOnly() {
        let build = ContainerBaseImages.buildRecipe(
            base: "localhost/duo-deploy-debian:bookworm-1", toolchain: "/opt/swift/usr")
        let key = ContainerBaseImages.key(recipe: build, context: "Swift version 6.3.1 (swift-6.3.1-RELEASE)")
        #expect(key.count == 16 && key.allSatisfy(\.isHexDigit))
        #expect(key == ContainerBaseImages.key(recipe: build, context: "Swift version 6.3.1 (swift-6.3.1-RELEASE)"))
        #expect(key != ContainerBaseImages.key(recipe: build, context: "Swift version 6.3.2 (swift-6.3.2-RELEASE)"))
        let otherBase = ContainerBaseImages.buildRecipe(
            base: "localhost/duo-deploy-debian:bookworm-2", toolchain: "/opt/swift/usr")
        #expect(key != ContainerBaseImages.key(recipe: otherBase, context: "Swift version 6.3.1 (swift-6.3.1-RELEASE)"))
        #expect(build.contains("ENV PATH=/opt/swift/usr/bin:"))
        #expect(ContainerBaseImages.redisRecipe(base: "b").hasPrefix("FROM b\n"))
        #expect(ContainerBaseImages.debianRecipe.contains("debootstrap --variant=minbase bookworm"))
    }

    @Test func slimmingKeepsTheCopyrightsAndEmptiesTheMachineID() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ct-slim-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let files = FileManager.default
        for directory in [
            "etc/apt", "etc/dpkg/dpkg.cfg.d", "usr/share/doc/bash", "usr/share/man/man1", "var/cache/apt/archives",
        ] {
            try files.createDirectory(atPath: root + "/" + directory, withIntermediateDirectories: true)
        }
        for file in [
            "usr/share/doc/bash/copyright", "usr/share/doc/bash/README", "usr/share/man/man1/bash.1", "etc/machine-id",
            "var/cache/apt/pkgcache.bin", "var/cache/apt/archives/a.deb", "etc/resolv.conf",
        ] {
            try "x\n".write(toFile: root + "/" + file, atomically: false, encoding: .utf8)
        }
        try ContainerBaseImages.slim(root: root)
        #expect(files.fileExists(atPath: root + "/usr/share/doc/bash/copyright"))
        #expect(!files.fileExists(atPath: root + "/usr/share/doc/bash/README"))
        #expect(files.fileExists(atPath: root + "/usr/share/doc/bash"))
        #expect(!files.fileExists(atPath: root + "/usr/share/man/man1"))
        #expect(!files.fileExists(atPath: root + "/var/cache/apt/pkgcache.bin"))
        #expect(!files.fileExists(atPath: root + "/var/cache/apt/archives/a.deb"))
        #expect(!files.fileExists(atPath: root + "/etc/resolv.conf"))
        #expect(files.contents(atPath: root + "/etc/machine-id") == Data())
        #expect(
            try String(contentsOfFile: root + "/etc/apt/sources.list", encoding: .utf8).contains("bookworm-security"))
        #expect(
            try String(contentsOfFile: root + "/etc/dpkg/dpkg.cfg.d/slim", encoding: .utf8).contains(
                "path-exclude /usr/share/man/*"))
    }

    @Test func thePairsThirtyPushesAlternateRelaysAndGrants() {
        let routes = (0..<ContainerPairPushes.count).map(ContainerPairPushes.route)
        #expect(routes.prefix(4).map(\.relay) == [0, 1, 0, 1])
        #expect(routes.prefix(4).map(\.grant) == [0, 0, 1, 1])
        // Each relay's grant goes through each relay.
        #expect(Set(routes.map { "\($0.relay)\($0.grant)" }) == ["00", "10", "01", "11"])
        #expect(ContainerPairPushes.outcome(status: 0, output: "delivered") == .delivered)
        #expect(
            ContainerPairPushes.outcome(status: 1, output: "duo-relay push: refused for now (rate_limited)") == .refused
        )
        #expect(ContainerPairPushes.outcome(status: 1, output: "duo-relay push: 429 phone") == .refused)
        #expect(ContainerPairPushes.outcome(status: 1, output: "duo-relay push: no connection") == .other)
        #expect(
            ContainerPairPushes.expectedDelivered + ContainerPairPushes.expectedRefused == ContainerPairPushes.count)
    }
}
