import DuoRelayClient
import Foundation
import Glibc
import RelayCrypto

/// `container-test`: OPERATIONS.md's container and Kubernetes recipes run with podman as written (the blocks
/// marked `scripts/container-test`, taken from the document by `scripts/doc-test --extract`), scripts/container-test
/// drives it from the repository's root with the host's `duo-relay` in PATH:
///   1. the image, built from a clean checkout by the documented podman build on base images made here and
///      cached by their recipe; what it holds: user, command, packages, no compiler or extra shell, no key,
///      static runtime;
///   2. the container: the documented dry run and `podman run` against `duo-relay apns-sim` on the host; a push
///      delivered, /metrics, the documented rotation with SIGHUP, SIGTERM within the grace;
///   3. Kubernetes: the documented kustomization rendered by `kubectl kustomize` and played with `podman kube
///      play`: the securityContext on the process, the probes' endpoints, limits shared in Redis, a push, a
///      clean stop;
///   4. two relay containers and one Redis container: one phone's limit admitted exactly once.
/// Each failed check prints one line `container-test: FAIL: <what>` and the run exits 1; 77 when no container
/// engine works here; 130 on SIGINT or SIGTERM. Everything made is removed at the end but the cached base
/// images. No grant, token, password or key is printed.
final class ContainerTestRun: RecipeRun {
    static let program = "container-test"

    static let documentedImage = "localhost/duo-relay:1.0.0"
    static let relayCache = "localhost/duo-deploy-relay:cache"
    static let probe = "localhost/duo-deploy-probe:catatonit"
    static let containers = ["duo-relay", "duo-ct-holder", "duo-ct-redis", "duo-ct-relay-1", "duo-ct-relay-2"]
    static let kubeNetwork = "podman-default-kube-network"

    let work: String
    var ports = RecipePorts()
    let files: Int
    let processes: Int

    // What the stages hand on.
    var base = ""
    var builder = ""
    var redisImage = ""
    var toolchain = ""
    var gateway = ""
    var origin = ""
    var pki: String { work + "/pki" }
    var operatorDirectory: String { work + "/operator" }
    var deliveries: String { work + "/deliveries.jsonl" }
    /// Every token, grant, key and password given to a relay: none may appear in its log.
    var secretsGiven: [String] = []
    var redisAddress = ""

    // What the clean-up removes.
    var simulator: RecipeProcess?
    var played: [String] = []
    var secretName: String?
    var newVolumes: [String] = []
    var kubeNetworkExisted = true
    var madeTags: [String] = []
    /// The images the run's podman build made (its build stage and the layers under it).
    var madeImages: Set<String> = []

    static func run(_ arguments: [String]) -> Int32 {
        guard arguments.isEmpty else {
            printError("usage: duo-relay-recipes container-test (from the repository's root; scripts/container-test)")
            return 2
        }
        var template = Array("/tmp/duo-container-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            printError("container-test: FAIL: cannot make a directory in /tmp")
            return 1
        }
        RecipeProcess.stopChildrenOnSignal()
        let run = ContainerTestRun(work: String(cString: made))
        var status: Int32 = 0
        do {
            try run.checkEverything()
        } catch {
            status = Self.report(error)
        }
        run.cleanUp()
        return RecipeProcess.interrupted ? 130 : status
    }

    /// Prints the failure's lines; its exit status.
    static func report(_ failure: RecipeFailure) -> Int32 {
        if RecipeProcess.interrupted { return 130 }
        for line in lines(failure) { printError(line) }
        return status(failure)
    }

    /// What a failure prints on standard error: the detail, then one line.
    static func lines(_ failure: RecipeFailure) -> [String] {
        let detail = failure.detail.isEmpty ? [] : [failure.detail]
        switch failure.code {
        case .interrupted: return []
        case .noEngine:
            return detail + ["container-test: no working container engine on this machine: \(failure.reason)"]
        default: return detail + ["container-test: FAIL: \(failure.reason)"]
        }
    }

    /// The exit status of a failure: 1 a check, 77 no container engine, 130 a signal.
    static func status(_ failure: RecipeFailure) -> Int32 {
        switch failure.code {
        case .interrupted: return 130
        case .noEngine: return 77
        default: return 1
        }
    }

    init(work: String) {
        self.work = work
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        files = ContainerRecipeEdits.files(hardLimit: limit.rlim_max == rlim_t.max ? nil : UInt64(limit.rlim_max))
        getrlimit(__rlimit_resource_t(__RLIMIT_NPROC.rawValue), &limit)
        processes = ContainerRecipeEdits.processes(
            hardLimit: limit.rlim_max == rlim_t.max ? nil : UInt64(limit.rlim_max))
    }

    func checkEverything() throws(RecipeFailure) {
        try prepareEngine()
        try prepareBaseImages()
        let blocks = work + "/blocks"
        try expect(
            try run("scripts/doc-test", ["--extract", blocks]).succeeded,
            "the documents' command blocks (scripts/doc-test --extract)")
        try checkImage()
        try startSimulator()
        try checkContainer()
        try checkKubernetes()
        try checkPair()
        say("all checks passed")
    }

    // MARK: - The engine

    /// runc and rlimits this sandbox can grant for every podman command; a container that runs, or exit 77.
    func prepareEngine() throws(RecipeFailure) {
        let conf = work + "/containers.conf"
        try write(ContainerRecipeEdits.containersConf(files: files, processes: processes), to: conf)
        setenv("CONTAINERS_CONF", conf, 1)
        guard RecipeProcess.find("podman") != nil else {
            throw RecipeFailure(.noEngine, "podman is not installed")
        }
        let info = try run("podman", ["info"])
        guard info.succeeded else { throw RecipeFailure(.noEngine, "podman info: \(info.lastErrorLine)") }
        if !(try podman(["image", "exists", Self.probe]).succeeded) {
            guard let catatonit = RecipeProcess.find("catatonit") else {
                throw RecipeFailure(.noEngine, "catatonit is not installed")
            }
            let directory = work + "/probe"
            try makeDirectory(directory)
            try expect(
                (try? FileManager.default.copyItem(atPath: catatonit, toPath: directory + "/catatonit")) != nil,
                "copying catatonit")
            _ = try run("tar", ["-C", directory, "-cf", work + "/probe.tar", "."])
            _ = try podman(["import", "-q", work + "/probe.tar", Self.probe])
        }
        let probe = try podman(["run", "--rm", "--network", "none", Self.probe, "/catatonit", "--version"])
        guard probe.succeeded else { throw RecipeFailure(.noEngine, "podman run: \(probe.lastErrorLine)") }
    }

    // MARK: - Base images, cached by the recipe that made them

    func prepareBaseImages() throws(RecipeFailure) {
        let debootstrap = try RecipeProcess.output(
            "dpkg-query", ["-W", "-f=${Version}", "debootstrap"], else: "debootstrap is not installed")
        base =
            "localhost/duo-deploy-debian:bookworm-"
            + ContainerBaseImages.key(recipe: ContainerBaseImages.debianRecipe, context: debootstrap)
        if !(try podman(["image", "exists", base]).succeeded) {
            say("making \(base) (debootstrap --variant=minbase bookworm)")
            let root = work + "/root"
            let made = try run("debootstrap", ["--variant=minbase", "bookworm", root, ContainerBaseImages.mirror])
            try expect(made.succeeded, "debootstrap bookworm", detail: made.tail(5))
            do { try ContainerBaseImages.slim(root: root) } catch { throw .check("slimming Debian's root") }
            let tar = try run("tar", ["--numeric-owner", "-C", root, "-cf", work + "/root.tar", "."])
            try expect(tar.succeeded, "base image duo-deploy-debian", detail: tar.tail(5))
            let imported = try podman(["import", "-q", "--change", "CMD [\"bash\"]", work + "/root.tar", base])
            try expect(imported.succeeded, "base image duo-deploy-debian", detail: imported.tail(5))
            try? FileManager.default.removeItem(atPath: root)
            try? FileManager.default.removeItem(atPath: work + "/root.tar")
        }
        guard let swift = RecipeProcess.find("swift") else { throw .check("swift is not in PATH") }
        toolchain =
            URL(fileURLWithPath: swift).resolvingSymlinksInPath().deletingLastPathComponent()
            .deletingLastPathComponent().path
        let version = try run("swift", ["--version"])
        let firstLine = (version.output + version.error).split(separator: "\n").first.map(String.init) ?? ""
        builder = try cachedImage(
            "duo-deploy-swift-build", ContainerBaseImages.buildRecipe(base: base, toolchain: toolchain),
            context: firstLine)
        redisImage = try cachedImage("duo-deploy-redis", ContainerBaseImages.redisRecipe(base: base), context: "")
        // Older Debian bases go once no image is built on them (a failed removal leaves one in use).
        try removeOtherTags(of: "duo-deploy-debian", keeping: base)
    }

    /// Removes the images of `name` but `image`.
    func removeOtherTags(of name: String, keeping image: String) throws(RecipeFailure) {
        let listed = try podman(["images", "--format", "{{.Repository}}:{{.Tag}}"]).output
        for line in listed.split(separator: "\n") where line.hasPrefix("localhost/\(name):") && line != image {
            _ = try podman(["rmi", String(line)])
        }
    }

    /// `localhost/NAME:KEY` built from `recipe` unless it exists; older tags of NAME are removed.
    func cachedImage(_ name: String, _ recipe: String, context: String) throws(RecipeFailure) -> String {
        let key = ContainerBaseImages.key(recipe: recipe, context: context)
        let image = "localhost/\(name):\(key)"
        guard !(try podman(["image", "exists", image]).succeeded) else { return image }
        say("making \(image)")
        let file = work + "/Containerfile.\(name)"
        try write(recipe, to: file)
        let built = try podman(["build", "-q", "--pull=never", "-f", file, "-t", image, work])
        try expect(built.succeeded, "base image \(name)", detail: built.tail(20))
        try removeOtherTags(of: name, keeping: image)
        return image
    }

    // MARK: - Clean-up

    /// Removes everything the run made but the cached base images (and the relay image's cache tag): on success,
    /// failure or a signal alike.
    func cleanUp() {
        RecipeProcess.beginCleanUp()
        simulator?.stop()
        for file in played { _ = try? podman(["kube", "down", file], cleanUp: true) }
        for name in Self.containers { _ = try? podman(["rm", "-f", "-t", "0", name], cleanUp: true) }
        if let secretName { _ = try? podman(["secret", "rm", secretName], cleanUp: true) }
        for volume in newVolumes { _ = try? podman(["volume", "rm", "-f", volume], cleanUp: true) }
        if !kubeNetworkExisted { _ = try? podman(["network", "rm", Self.kubeNetwork], cleanUp: true) }
        // The documented name goes; the image stays, as the cache of the next run's build.
        for tag in madeTags { _ = try? podman(["untag", tag, tag], cleanUp: true) }
        // The build's stage, then its layers as each becomes dangling; never an image that was there before.
        for _ in 0..<madeImages.count {
            guard let dangling = try? images(all: false, cleanUp: true) else { break }
            let removable = ContainerBuildStages.removable(dangling: dangling, made: madeImages)
            guard !removable.isEmpty,
                (try? podman(["rmi", "--no-prune"] + removable, cleanUp: true))?.succeeded == true
            else { break }
        }
        try? FileManager.default.removeItem(atPath: work)
    }

    // MARK: - Helpers

    func expect(_ condition: Bool, _ what: String, detail: String = "") throws(RecipeFailure) {
        guard condition else { throw .check(what, detail: detail) }
    }

    func run(
        _ executable: String, _ arguments: [String], input: Data? = nil, directory: String? = nil,
        environment: [String: String] = [:], timeout: Double? = nil
    ) throws(RecipeFailure) -> RecipeProcess.Finished {
        try RecipeProcess.run(
            executable, arguments, input: input, directory: directory, environment: environment, timeout: timeout)
    }

    func podman(_ arguments: [String], cleanUp: Bool = false) throws(RecipeFailure)
        -> RecipeProcess.Finished
    {
        try RecipeProcess.run("podman", arguments, cleanUp: cleanUp)
    }

    /// A container's PID on the host.
    func pid(of container: String) throws(RecipeFailure) -> String {
        try podman(["inspect", "-f", "{{.State.Pid}}", container]).output.trimmingCharacters(
            in: .whitespacesAndNewlines)
    }

    func write(_ text: String, to path: String, mode: mode_t? = nil) throws(RecipeFailure) {
        do { try text.write(toFile: path, atomically: false, encoding: .utf8) } catch {
            throw .check("cannot write \(path)")
        }
        if let mode { chmod(path, mode) }
    }

    func makeDirectory(_ path: String) throws(RecipeFailure) {
        do { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) } catch {
            throw .check("cannot make \(path)")
        }
    }

    func lineCount(_ path: String) -> Int { read(path).split(separator: "\n").count }

    /// A grant for `token` from the relay at `relay`, through DuoRelayClient (never printed).
    func grant(_ relay: String, token: String, check: String) throws(RecipeFailure) -> String {
        guard let url = URL(string: relay) else { throw .check("\(check): the relay's address") }
        let outcome = Self.waitFor {
            let client = RelayClient(relay: url, timeout: .seconds(10))
            let outcome = await client.grant(token: token, environment: .production)
            await client.close()
            return outcome
        }
        guard case .granted(let grant, _) = outcome else { throw .check("\(check): POST /v1/grant gave no grant") }
        return grant
    }

    /// One push through `duo-relay push` with `grant`; the exit status and what it printed.
    func push(_ relay: String, grant: String) throws(RecipeFailure) -> RecipeProcess.Finished {
        try run("duo-relay", ["push", "--relay", relay, "--grant", "-"], input: Data(grant.utf8))
    }

    /// One push through `duo-relay push`, delivered to the simulator.
    func pushDelivered(_ relay: String, grant: String, check: String) throws(RecipeFailure) {
        let before = lineCount(deliveries)
        let pushed = try push(relay, grant: grant)
        try expect(pushed.succeeded, "\(check): duo-relay push: \(pushed.tail(1))")
        try expect(lineCount(deliveries) == before + 1, "\(check): the simulator did not get the push")
    }

    /// No token, grant or key in what the relay wrote.
    func logsClean(_ log: String, check: String) throws(RecipeFailure) {
        try expect(
            !ContainerRelayOutput.holdsASecret(log, secrets: secretsGiven),
            "\(check): the relay's log holds a token, grant or key")
    }

    /// /metrics answers, passes `promtool check metrics` and has every metric the alert rules read.
    func metricsClean(_ url: String, check: String, sharedStore: Bool = false) throws(RecipeFailure) {
        guard let metrics = RecipeHTTP.get(url, seconds: 5), metrics.status == 200 else {
            throw .check("\(check): GET /metrics")
        }
        let promtool = try run("promtool", ["check", "metrics"], input: Data(metrics.body))
        try expect(promtool.succeeded, "\(check): promtool check metrics")
        let rules = read("deploy/prometheus/alerts.rules.yml")
        if let missing = ContainerRelayOutput.missingMetrics(metrics.text, rules: rules, sharedStore: sharedStore).first
        {
            throw .check("\(check): /metrics lacks \(missing), which the alert rules read")
        }
    }

    /// The container's process: UID/GID 10001, no capabilities, no_new_privs, a seccomp filter, read-only root.
    func processIsConfined(_ container: String, check: String) throws(RecipeFailure) {
        let status = read("/proc/\(try pid(of: container))/status")
        if let problem = ContainerConfinement(status: status).problems.first { throw .check("\(check): \(problem)") }
        let readOnly = try podman(["inspect", "-f", "{{.HostConfig.ReadonlyRootfs}}", container]).output
        try expect(
            readOnly.trimmingCharacters(in: .whitespacesAndNewlines) == "true",
            "\(check): the root file system is writable")
    }

    /// The container's last log lines, for the lines before a FAIL line.
    func logTail(_ container: String, _ count: Int) -> String {
        ((try? podman(["logs", container]))?.tail(count)) ?? ""
    }

    /// Runs an async body to its end from this synchronous run.
    static func waitFor<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let box = Outcome<T>()
        let done = DispatchSemaphore(value: 0)
        Task {
            box.value = await body()
            done.signal()
        }
        done.wait()
        return box.value!
    }

    private final class Outcome<T>: @unchecked Sendable {
        var value: T?
    }
}
