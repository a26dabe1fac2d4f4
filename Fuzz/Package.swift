// swift-tools-version:6.1
import PackageDescription

// libFuzzer targets for the pure modules (see README.md). A package of its own so that the main
// package's `swift build` and `swift test` never see them; build only through scripts/fuzz,
// with `-sanitize=fuzzer,address`.
let settings: [SwiftSetting] = [.swiftLanguageMode(.v6), .unsafeFlags(["-parse-as-library"])]

let targets = [
    "FuzzGrant", "FuzzPushRequest", "FuzzGrantRequest", "FuzzConfiguration", "FuzzBase64", "FuzzHTTP1Parser",
    "FuzzHTTP1ResponseReader",
    "FuzzPKCS11URI", "FuzzServerHandshake",
]

/// What a target needs beyond the pure modules: the server connection's TLS phase, with a real TLS session.
let extraDependencies: [String: [Target.Dependency]] = [
    "FuzzServerHandshake": [
        .product(name: "HTTPServer", package: "duo-relay"), .product(name: "TLS", package: "duo-relay"),
        .product(name: "MonotonicTime", package: "duo-relay"),
    ]
]

let package = Package(
    name: "duo-relay-fuzz",
    dependencies: [.package(name: "duo-relay", path: "..")],
    targets: [
        .systemLibrary(name: "CLibFuzzer"),
        .target(
            name: "FuzzSupport",
            dependencies: [
                "CLibFuzzer", .product(name: "RelayCore", package: "duo-relay"),
                .product(name: "RelayCrypto", package: "duo-relay"), .product(name: "JSON", package: "duo-relay"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]),
    ]
        + targets.map { name in
            .executableTarget(
                name: name,
                dependencies: [
                    "FuzzSupport", .product(name: "RelayCore", package: "duo-relay"),
                    .product(name: "RelayCrypto", package: "duo-relay"),
                    .product(name: "HTTP1", package: "duo-relay"), .product(name: "JSON", package: "duo-relay"),
                ] + (extraDependencies[name] ?? []),
                swiftSettings: settings)
        }
)
