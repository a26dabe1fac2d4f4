import Foundation

extension ContainerTestRun {
    /// A documented block extracted by `scripts/doc-test --extract`: `NAME.N.sh`.
    func block(_ name: String, _ number: Int) throws(RecipeFailure) -> String {
        let path = work + "/blocks/\(name).\(number).sh"
        try expect(FileManager.default.fileExists(atPath: path), "OPERATIONS.md has no block \(number) for \(name)")
        return path
    }

    /// The images podman lists now: every one with `all`, else the dangling ones (untagged, used by no other).
    func images(all: Bool, cleanUp: Bool = false) throws(RecipeFailure) -> [ContainerBuildStages.Listed] {
        let filter = all ? ["--all"] : ["--filter", "dangling=true"]
        let listing = try podman(["images"] + filter + ["--format", "json"], cleanUp: cleanUp)
        guard listing.succeeded, let images = ContainerBuildStages.parse(Data(listing.output.utf8)) else {
            throw .check("image: podman images", detail: listing.tail(3))
        }
        return images
    }

    /// 1. The image, built from a clean checkout (git archive of HEAD) by the documented podman build, and what it
    /// holds.
    func checkImage() throws(RecipeFailure) {
        let head = try RecipeProcess.output("git", ["rev-parse", "--short", "HEAD"], else: "git rev-parse HEAD")
        say("1. podman build of a clean checkout (\(head)), as OPERATIONS.md builds it")
        let checkout = work + "/checkout"
        try makeDirectory(checkout)
        try expect(try run("git", ["archive", "-o", work + "/checkout.tar", "HEAD"]).succeeded, "git archive HEAD")
        try expect(try run("tar", ["-x", "-f", work + "/checkout.tar", "-C", checkout]).succeeded, "git archive HEAD")
        let changed = try run(
            "git",
            [
                "status", "--porcelain", "--", "Package.swift", "Sources", "Plugins", "Benchmarks", "Tests",
                "deploy/container",
            ])
        if !changed.output.isEmpty {
            say(
                "note: uncommitted changes to what the image builds from are not in the image"
            )
        }
        let imagesBefore = try images(all: true)
        let buildBegan = Int(Date().timeIntervalSince1970)
        let built = try run(
            "bash", ["-euo", "pipefail", try block("container", 1)], directory: checkout,
            environment: ["TOOLCHAIN": toolchain, "BUILD_IMAGE": builder, "RUNTIME_IMAGE": base])
        madeImages = ContainerBuildStages.made(before: imagesBefore, after: try images(all: true), since: buildBegan)
        try expect(built.succeeded, "image: the documented podman build", detail: built.tail(30))
        let image = Self.documentedImage
        madeTags.append(image)
        let previous = try podman(["image", "inspect", "-f", "{{.Id}}", Self.relayCache]).output
        _ = try podman(["tag", image, Self.relayCache])
        let current = try podman(["image", "inspect", "-f", "{{.Id}}", image]).output
        if !previous.isEmpty && previous != current {
            _ = try podman(["rmi", previous.trimmingCharacters(in: .whitespacesAndNewlines)])
        }

        let inspected = try podman(["image", "inspect", image])
        guard let facts = ContainerImageFacts(inspectJSON: Data(inspected.output.utf8)) else {
            throw .check("image: podman image inspect")
        }
        try expect(facts.user == ContainerImageFacts.documentedUser, "image: user is not 10001:10001")
        try expect(
            facts.entrypoint == ContainerImageFacts.documentedEntrypoint
                && facts.command == ContainerImageFacts.documentedCommand, "image: entrypoint and command")
        try expect(!facts.environmentNamesASecret, "image: its environment names a secret")

        let root = try RecipeProcess.output(
            "podman", ["image", "mount", image], else: "image: podman image mount")
        let baseRoot = try RecipeProcess.output(
            "podman", ["image", "mount", base], else: "image: podman image mount")
        defer { _ = try? podman(["image", "unmount", image, base], cleanUp: true) }
        for package in ContainerImageFacts.runtimePackages(dockerfile: read("deploy/container/Dockerfile")) {
            let found = try run("dpkg-query", ["--admindir=\(root)/var/lib/dpkg", "-W", package])
            try expect(found.succeeded, "image: package \(package) is missing")
        }
        let files = FileManager.default
        for tool in ContainerImageFacts.buildTools {
            for directory in ContainerImageFacts.binaryDirectories {
                try expect(
                    !files.fileExists(atPath: "\(root)/\(directory)/\(tool)"), "image: holds /\(directory)/\(tool)")
            }
        }
        func shells(_ root: String) -> [String] {
            ContainerImageFacts.shells.flatMap { shell in
                ContainerImageFacts.shellDirectories.map { "\($0)/\(shell)" }.filter {
                    files.fileExists(atPath: "\(root)/\($0)")
                }
            }
        }
        try expect(shells(root) == shells(baseRoot), "image: shells beyond Debian's base")
        let leftovers = files.enumerator(atPath: root + toolchain)?.contains { path in
            let type =
                (try? files.attributesOfItem(atPath: "\(root)\(toolchain)/\(path)"))?[.type] as? FileAttributeType
            return type != .typeDirectory
        }
        try expect(
            leftovers != true && !files.fileExists(atPath: root + "/src") && !files.fileExists(atPath: root + "/out"),
            "image: build leftovers (toolchain, /src, /out)")
        // grep -I: the binary, which parses PEM, names the marker too; text files are what a key would be.
        let keys = try run(
            "grep", ["-rlsI", "--exclude-dir=proc", "--exclude-dir=sys", "-e", "PRIVATE KEY-----", root])
        try expect(keys.output.isEmpty, "image: holds a private key")
        let keyFile = files.enumerator(atPath: root)?.contains { path in
            ContainerImageFacts.isKeyOrRepositoryFile(((path as? String ?? "") as NSString).lastPathComponent)
        }
        try expect(keyFile != true, "image: holds a key file or a piece of the repository")
        let linked = try run("ldd", [root + "/usr/local/bin/duo-relay"]).output
        try expect(
            !linked.contains("libswift") && !linked.contains("libFoundation"),
            "image: the Swift runtime is linked dynamically")
        say(
            "image: \(facts.size / 1_000_000) MB, user 10001:10001, packages as named, no compiler, no key, static Swift runtime"
        )
    }
}
