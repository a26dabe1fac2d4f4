import Foundation
import Testing

@testable import RecipeRunner

/// What container-test reads from podman, /proc and the relay, tested on real outputs.
@Suite struct ContainerTestReadingsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func repositoryFile(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    @Test func theImageInspectionReadsUserCommandEnvironmentAndSize() throws {
        let facts = try #require(ContainerImageFacts(inspectJSON: Data(ContainerTestFixtures.imageInspect.utf8)))
        #expect(facts.user == ContainerImageFacts.documentedUser)
        #expect(facts.entrypoint == ["duo-relay"])
        #expect(facts.command == ["serve", "--config", "/etc/duo-relay/relay.json"])
        #expect(facts.size == 259_620_349)
        #expect(!facts.environmentNamesASecret)
        var leaky = facts
        leaky.environment.append("APNS_TEAM_ID=ABCDE12345")
        #expect(leaky.environmentNamesASecret)
        leaky.environment = ["RELAY_KEYS_FILE=/run/secrets/x"]
        #expect(leaky.environmentNamesASecret)
        #expect(ContainerImageFacts(inspectJSON: Data("[]".utf8)) == nil)
        #expect(ContainerImageFacts(inspectJSON: Data("Error: no such image".utf8)) == nil)
    }

    @Test func theRuntimePackagesAreTheDockerfilesRuntimeStageInstall() throws {
        let dockerfile = try Self.repositoryFile("deploy/container/Dockerfile")
        #expect(
            ContainerImageFacts.runtimePackages(dockerfile: dockerfile) == [
                "libssl3", "libuv1", "libnghttp2-14", "libjemalloc2", "libhiredis0.14", "libcurl4", "ca-certificates",
            ])
        // The build stage's packages are not the runtime's.
        #expect(
            ContainerImageFacts.runtimePackages(dockerfile: "FROM x\nRUN apt-get install --no-install-recommends a b\n")
                .isEmpty)
    }

    @Test func keyFilesAndPiecesOfTheRepositoryAreNamed() {
        for name in ["AuthKey_KEYID12345.p8", "relay_keys", "Package.swift", ".build"] {
            #expect(ContainerImageFacts.isKeyOrRepositoryFile(name))
        }
        for name in ["duo-relay", "libssl.so.3", "relay.json", "p8"] {
            #expect(!ContainerImageFacts.isKeyOrRepositoryFile(name))
        }
    }

    @Test func aConfinedProcessHasNoProblems() {
        let confinement = ContainerConfinement(status: ContainerTestFixtures.confinedStatus)
        #expect(confinement.uid == "10001" && confinement.gid == "10001")
        #expect(confinement.effectiveCapabilities == "0000000000000000")
        #expect(confinement.problems.isEmpty)
        #expect(ContainerConfinement.coreFilesOff(limits: ContainerTestFixtures.confinedLimits))
    }

    @Test func eachMissingConfinementIsNamed() {
        func problems(_ from: String, _ to: String) -> [String] {
            let status = ContainerTestFixtures.confinedStatus.replacingOccurrences(of: from, with: to)
            #expect(status != ContainerTestFixtures.confinedStatus)
            return ContainerConfinement(status: status).problems
        }
        #expect(problems("Uid:\t10001", "Uid:\t0") == ["not UID/GID 10001"])
        #expect(problems("Gid:\t10001", "Gid:\t10002") == ["not UID/GID 10001"])
        #expect(problems("CapEff:\t0000000000000000", "CapEff:\t00000000a80425fb") == ["holds capabilities"])
        #expect(problems("CapBnd:\t0000000000000000", "CapBnd:\t000001ffffffffff") == ["holds capabilities"])
        #expect(problems("NoNewPrivs:\t1", "NoNewPrivs:\t0") == ["may gain privileges (no_new_privs unset)"])
        #expect(problems("Seccomp:\t2", "Seccomp:\t0") == ["no seccomp filter"])
        // A status without the fields (no such process) is confined in no way.
        #expect(ContainerConfinement(status: "").problems.count == 4)
        let cores = ContainerTestFixtures.confinedLimits.replacingOccurrences(
            of: "Max core file size        0                    0 ",
            with: "Max core file size        0                    unlimited ")
        #expect(cores != ContainerTestFixtures.confinedLimits)
        #expect(!ContainerConfinement.coreFilesOff(limits: cores))
        #expect(!ContainerConfinement.coreFilesOff(limits: ""))
    }

    @Test func theAlertRulesMetricsAreLookedForInMetrics() throws {
        let rules = try Self.repositoryFile("deploy/prometheus/alerts.rules.yml")
        let names = ContainerRelayOutput.alertMetricNames(rules: rules)
        #expect(names.contains("duo_relay_ready") && names.contains("duo_relay_limits_store_state"))
        #expect(names == Array(Set(names)).sorted())
        #expect(names.allSatisfy { $0.hasPrefix("duo_relay_") && !$0.hasSuffix("_") })
        let all = names.map { "# HELP \($0) x\n# TYPE \($0) gauge\n\($0) 1\n" }.joined()
        #expect(ContainerRelayOutput.missingMetrics(all, rules: rules, sharedStore: true).isEmpty)
        let memory = names.filter { !$0.hasPrefix("duo_relay_limits_store_") }
            .map { "# TYPE \($0) counter\n" }.joined()
        // With limits in memory, the store's metrics are not expected.
        #expect(ContainerRelayOutput.missingMetrics(memory, rules: rules, sharedStore: false).isEmpty)
        #expect(
            ContainerRelayOutput.missingMetrics(memory, rules: rules, sharedStore: true)
                == names.filter { $0.hasPrefix("duo_relay_limits_store_") })
        // Without `tls`, the TLS front's metrics are not expected; with it, they are.
        let plain = names.filter { !$0.hasPrefix("duo_relay_tls_") }.map { "# TYPE \($0) gauge\n" }.joined()
        #expect(names.contains("duo_relay_tls_certificate_expiry_timestamp_seconds"))
        #expect(ContainerRelayOutput.missingMetrics(plain, rules: rules, sharedStore: true).isEmpty)
        #expect(
            ContainerRelayOutput.missingMetrics(plain, rules: rules, sharedStore: true, tls: true)
                == names.filter { $0.hasPrefix("duo_relay_tls_") })
        // A sample without its TYPE line, or a longer name's TYPE line, is not the metric's.
        let untyped = all.replacingOccurrences(
            of: "# TYPE duo_relay_ready gauge", with: "# TYPE duo_relay_ready_x gauge")
        #expect(ContainerRelayOutput.missingMetrics(untyped, rules: rules, sharedStore: true) == ["duo_relay_ready"])
    }

    @Test func aLogHoldingASecretIsFound() {
        let log = "duo-relay: listening on 0.0.0.0:8787\nduo-relay: push delivered (apns 200)\n"
        let secrets = ["3f" + String(repeating: "a", count: 62), "grant.AAAA", ""]
        #expect(!ContainerRelayOutput.holdsASecret(log, secrets: secrets))
        #expect(ContainerRelayOutput.holdsASecret(log + "token \(secrets[0])\n", secrets: secrets))
        #expect(ContainerRelayOutput.holdsASecret("x grant.AAAA", secrets: secrets))
    }

    @Test func theImagesRemovedAreOnlyThoseTheBuildMade() throws {
        // podman images --all --format json, trimmed to what is read: before the build began at 2000, another run's
        // stage (old1) on the shared cache layer (apt0).
        let before = try #require(
            ContainerBuildStages.parse(
                Data(#"[{"Id": "apt0", "Created": 900, "Dangling": false}, {"Id": "old1", "Created": 1900}]"#.utf8)))
        #expect(before == [.init(id: "apt0", created: 900), .init(id: "old1", created: 1900)])
        // After: the build's layer (src2) on apt0 and its stage (stage3) on src2; tag4 made at 1500 only lost its
        // tag meanwhile.
        let after = try #require(
            ContainerBuildStages.parse(
                Data(
                    #"""
                    [{"Id": "apt0", "Created": 900}, {"Id": "old1", "Created": 1900}, {"Id": "src2", "Created": 2010},
                     {"Id": "stage3", "Created": 2050}, {"Id": "tag4", "Created": 1500}]
                    """#.utf8)))
        let made = ContainerBuildStages.made(before: before, after: after, since: 2000)
        #expect(made == ["src2", "stage3"])
        // Removed top-down as each becomes dangling, stopping at apt0 (there before): never old1, apt0 or tag4.
        let listed = { (ids: [String]) in ids.map { ContainerBuildStages.Listed(id: $0, created: 0) } }
        #expect(ContainerBuildStages.removable(dangling: listed(["old1", "stage3", "tag4"]), made: made) == ["stage3"])
        #expect(ContainerBuildStages.removable(dangling: listed(["old1", "src2", "tag4"]), made: made) == ["src2"])
        #expect(ContainerBuildStages.removable(dangling: listed(["old1", "apt0", "tag4"]), made: made).isEmpty)
        #expect(ContainerBuildStages.made(before: after, after: after, since: 0).isEmpty)
        #expect(ContainerBuildStages.parse(Data("Error: no such image".utf8)) == nil)
        #expect(ContainerBuildStages.parse(Data("[]".utf8)) == [])
    }

    @Test func freePortsAreNoSocketsAndNoneGivenTwice() {
        // Real lines of /proc/net/tcp: 0x07E8 = 2024, 0x4E21 = 20001.
        let table = """
              sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
               0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1281 1
               1: 0100007F:4E21 0100007F:9C4A 01 00000000:00000000 00:00000000 00000000     0        0 9921 1
            """
        let used = RecipePorts.localPorts(procNetTCP: table)
        #expect(used == [2024, 20001])
        let tcp6 = """
              sl  local_address                         remote_address                        st
               0: 00000000000000000000000001000000:4E22 00000000000000000000000000000000:0000 0A
            """
        #expect(RecipePorts.localPorts(procNetTCP: tcp6) == [20002])
        var ports = RecipePorts()
        // The random pick is in use: the next free one after it.
        #expect(ports.next(used: used, random: { _ in 20001 }) == 20002)
        #expect(ports.next(used: used, random: { _ in 20001 }) == 20003)
        // The last port wraps to the first.
        #expect(ports.next(used: [29999], random: { _ in 29999 }) == 20000)
        var full = RecipePorts()
        #expect(full.next(used: Set(RecipePorts.range)) == nil)
    }
}
