import Foundation

/// What `podman image inspect` says of an image, and what the image's checks compare it with.
struct ContainerImageFacts: Equatable {
    var user: String
    var entrypoint: [String]
    var command: [String]
    var environment: [String]
    /// Bytes.
    var size: Int

    /// The user and command OPERATIONS.md documents for the image.
    static let documentedUser = "10001:10001"
    static let documentedEntrypoint = ["duo-relay"]
    static let documentedCommand = ["serve", "--config", "/etc/duo-relay/relay.json"]
    /// Words that name a secret: none belongs in the image's environment.
    static let secretVariables = ["RELAY_KEYS", "APNS_KEY", "APNS_TEAM", "REDIS_PASSWORD"]
    /// Compilers and build tools the runtime image must not hold, in any of `binaryDirectories`.
    static let buildTools = [
        "cc", "gcc", "g++", "clang", "swift", "swiftc", "swift-frontend", "as", "ld", "ld.gold", "ld.lld", "make",
        "cpp",
    ]
    static let binaryDirectories = ["usr/bin", "bin", "usr/local/bin"]
    /// Shells: the image holds no more of them than Debian's base does.
    static let shells = ["sh", "bash", "dash", "rbash", "ash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "busybox"]
    static let shellDirectories = ["usr/bin", "bin"]
    /// Names of files that are key material or a piece of the repository.
    static func isKeyOrRepositoryFile(_ name: String) -> Bool {
        name.hasSuffix(".p8") || ["relay_keys", "Package.swift", ".build"].contains(name)
    }

    /// Reads the first image of `podman image inspect`'s JSON array; nil if it is not one.
    init?(inspectJSON: Data) {
        guard let images = try? JSONSerialization.jsonObject(with: inspectJSON) as? [[String: Any]],
            let image = images.first, let config = image["Config"] as? [String: Any]
        else { return nil }
        user = config["User"] as? String ?? ""
        entrypoint = config["Entrypoint"] as? [String] ?? []
        command = config["Cmd"] as? [String] ?? []
        environment = config["Env"] as? [String] ?? []
        size = (image["Size"] as? NSNumber)?.intValue ?? 0
    }

    /// Whether a variable of the environment names a secret.
    var environmentNamesASecret: Bool {
        environment.contains { variable in Self.secretVariables.contains { variable.contains($0) } }
    }

    /// The packages the Dockerfile's runtime stage installs: the words after `--no-install-recommends` in the
    /// first install after `FROM ${RUNTIME_IMAGE}`, up to the `&&` that ends it.
    static func runtimePackages(dockerfile: String) -> [String] {
        guard let stage = dockerfile.range(of: "\nFROM ${RUNTIME_IMAGE}") else { return [] }
        let joined = dockerfile[stage.upperBound...].replacingOccurrences(of: "\\\n", with: " ")
            .replacingOccurrences(of: "\n", with: " ")
        guard let start = joined.range(of: "--no-install-recommends ") else { return [] }
        let words = joined[start.upperBound...].prefix { $0 != "&" }
        return words.split(separator: " ").map(String.init)
    }
}
