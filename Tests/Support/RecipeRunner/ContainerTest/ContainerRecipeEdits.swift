/// The documented blocks as a run executes them, changed only where this machine needs it.
enum ContainerRecipeEdits {
    /// OPERATIONS.md's `podman run` block with the host ports free ones, beside `--ulimit core=0` the limits this
    /// machine grants (a `--ulimit` replaces containers.conf's, and podman's own nofile default is above what a
    /// runtime may set here without CAP_SYS_RESOURCE), and the simulator's CA mounted where relay.json says.
    /// Nil when the block lacks one of the places it changes.
    static func runBlock(_ block: String, port: Int, metricsPort: Int, ulimits: String, caFile: String) -> String? {
        let mount = "-v \"$PWD/relay.json:/etc/duo-relay/relay.json:ro\""
        let edits = [
            ("127.0.0.1:8787:8787", "127.0.0.1:\(port):8787"),
            ("127.0.0.1:9787:9787", "127.0.0.1:\(metricsPort):9787"),
            ("--ulimit core=0", "--ulimit core=0 \(ulimits)"),
            (mount, "\(mount) -v \"\(caFile):/etc/duo-relay/ca.pem:ro\""),
        ]
        var text = block
        for (from, to) in edits {
            guard text.contains(from) else { return nil }
            text = text.replacingOccurrences(of: from, with: to)
        }
        return text
    }

    /// The Kubernetes block as written, but `kubectl apply -k DIR` renders what it would apply into $APPLIED
    /// (no cluster here).
    static func kubernetesBlock(_ block: String) -> String {
        "kubectl() { if [ \"$1 $2\" = \"apply -k\" ]; then command kubectl kustomize \"$3\" >\"$APPLIED\"; "
            + "else command kubectl \"$@\"; fi; }\n" + block
    }

    /// `--ulimit` options for the open files and processes this machine grants (soft = hard: podman 4.3 swaps
    /// them for a pod's infra container).
    static func ulimitOptions(files: Int, processes: Int) -> String {
        "--ulimit nofile=\(files):\(files) --ulimit nproc=\(processes):\(processes)"
    }

    /// containers.conf for every podman command of a run: runc, and the limits this machine grants.
    static func containersConf(files: Int, processes: Int) -> String {
        """
        [containers]
        default_ulimits = ["nofile=\(files):\(files)", "nproc=\(processes):\(processes)"]
        [engine]
        runtime = "runc"

        """
    }

    /// The open files to ask for: the hard limit, 65536 if unlimited.
    static func files(hardLimit: UInt64?) -> Int {
        hardLimit.map { Int(clamping: $0) } ?? 65536
    }

    /// The processes to ask for: the hard limit, at most 4096 (4096 if unlimited).
    static func processes(hardLimit: UInt64?) -> Int {
        hardLimit.map { Int(clamping: min($0, 4096)) } ?? 4096
    }
}

/// One phone's 30 pushes over the pair of relays: the push limit (20 a period) admits exactly 20 wherever they
/// land, and refuses the other 10.
enum ContainerPairPushes {
    static let count = 30
    static let expectedDelivered = 20
    static let expectedRefused = 10

    /// Push `index` goes to relay `index % 2`, with the grant of relay `index / 2 % 2` (each relay's grant
    /// through each relay).
    static func route(_ index: Int) -> (relay: Int, grant: Int) { (index % 2, index / 2 % 2) }

    enum Outcome: Equatable { case delivered, refused, other }

    /// A push's outcome from `duo-relay push`'s exit status and output: refused when it says the phone's limit
    /// (`refused for now`, `rate_limited` or the status 429).
    static func outcome(status: Int32, output: String) -> Outcome {
        if status == 0 { return .delivered }
        let refusal = ["refused for now", "rate_limited", "429"]
        return refusal.contains { output.contains($0) } ? .refused : .other
    }
}
