import Foundation
import RelayCrypto

/// The base images made here (no registry is reachable), each cached under a tag keyed by its recipe, so that a
/// changed recipe makes a new image and an unchanged one is reused.
enum ContainerBaseImages {
    static let mirror = "http://deb.debian.org/debian"

    /// The cache key of a recipe: 16 hex digits of a SHA-256 based digest of the recipe and what else it
    /// depends on (a tool's version).
    static func key(recipe: String, context: String) -> String {
        let digest = HMACSHA256.authenticationCode(
            for: Array((recipe + "\n" + context).utf8), using: Array("duo-deploy base image".utf8))
        return digest.prefix(8).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// Debian 12 as debian:bookworm-slim is made: minbase, no documentation, manual pages or locales. The
    /// recipe's text (what `makeDebian` does, keyed with debootstrap's version) names its image.
    static let debianRecipe = """
        debootstrap --variant=minbase bookworm ROOT \(mirror)
        sources.list: \(debianSources)
        dpkg.cfg.d/slim: \(debianSlim)
        removed: usr/share/doc/* but copyright, usr/share/man/*, usr/share/info/*, usr/share/locale/*,
          var/lib/apt/lists/*, var/cache/apt/*.bin, var/cache/apt/archives/*.deb, etc/resolv.conf, etc/hostname
        emptied: etc/machine-id
        imported with CMD ["bash"]
        """

    static let debianSources = """
        deb \(mirror) bookworm main
        deb \(mirror) bookworm-updates main
        deb http://deb.debian.org/debian-security bookworm-security main

        """

    static let debianSlim = """
        path-exclude /usr/share/doc/*
        path-include /usr/share/doc/*/copyright
        path-exclude /usr/share/man/*
        path-exclude /usr/share/info/*
        path-exclude /usr/share/locale/*

        """

    /// The build stage: what the Swift toolchain needs beside itself (the toolchain is lent read-only).
    static func buildRecipe(base: String, toolchain: String) -> String {
        """
        FROM \(base)
        RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
            binutils libc6-dev libgcc-12-dev libstdc++-12-dev zlib1g-dev libncurses6 libcurl4 libxml2 libsqlite3-0 \\
            ca-certificates && rm -rf /var/lib/apt/lists/*
        ENV PATH=\(toolchain)/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

        """
    }

    /// Debian's redis-server, for the Redis the kustomization and the pair of relays run.
    static func redisRecipe(base: String) -> String {
        """
        FROM \(base)
        RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \\
            && rm -rf /var/lib/apt/lists/*
        USER redis
        ENTRYPOINT ["redis-server"]

        """
    }

    /// Slims a debootstrapped root as the official image is.
    static func slim(root: String) throws {
        let files = FileManager.default
        try debianSources.write(toFile: root + "/etc/apt/sources.list", atomically: false, encoding: .utf8)
        try debianSlim.write(toFile: root + "/etc/dpkg/dpkg.cfg.d/slim", atomically: false, encoding: .utf8)
        if let walk = files.enumerator(atPath: root + "/usr/share/doc") {
            for case let path as String in walk {
                let full = root + "/usr/share/doc/" + path
                let type = (try? files.attributesOfItem(atPath: full))?[.type] as? FileAttributeType
                if (path as NSString).lastPathComponent != "copyright", type != .typeDirectory {
                    try? files.removeItem(atPath: full)
                }
            }
        }
        for directory in ["usr/share/man", "usr/share/info", "usr/share/locale", "var/lib/apt/lists"] {
            for name in (try? files.contentsOfDirectory(atPath: root + "/" + directory)) ?? [] {
                try? files.removeItem(atPath: root + "/" + directory + "/" + name)
            }
        }
        for name in (try? files.contentsOfDirectory(atPath: root + "/var/cache/apt")) ?? [] where name.hasSuffix(".bin")
        {
            try? files.removeItem(atPath: root + "/var/cache/apt/" + name)
        }
        let archives = root + "/var/cache/apt/archives"
        for name in (try? files.contentsOfDirectory(atPath: archives)) ?? [] where name.hasSuffix(".deb") {
            try? files.removeItem(atPath: archives + "/" + name)
        }
        try? files.removeItem(atPath: root + "/etc/resolv.conf")
        try? files.removeItem(atPath: root + "/etc/hostname")
        try Data().write(to: URL(fileURLWithPath: root + "/etc/machine-id"))
    }
}
