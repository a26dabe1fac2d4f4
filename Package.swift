// swift-tools-version:6.1
import PackageDescription

// Layout (README.md, "Layout", has a line per module): the folders under Sources/ are the layers a push passes
// through. C: one thin system-library module per C library. Base: the error shape, the clock's value, the version.
// Crypto: OpenSSL's cryptography and TLS (the only importers of COpenSSL). Protocols: the pure HTTP/1.1 parser and
// connection machine and the one JSON reader. Network: the event loop, client streams, the HTTP server, the HTTP/2
// (APNs) and Redis clients. Relay: the pure core, the server that wires the workers, the `duo-relay` command and its
// push client. Library: DuoRelayClient, for channels. Simulator: the APNs simulator and the fault-injecting TCP
// forwarder. Outside Sources/: the benchmark and load tool (Benchmarks/), the version's build-tool plugin (Plugins/),
// and the tests' helpers and the documents' recipe runner (Tests/Support: no shipped product depends on them).
let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

// The relay binary allocates with jemalloc (BENCHMARKS.md, "The allocator"). Sanitizer builds
// (scripts/sanitize) set DUO_RELAY_SYSTEM_MALLOC: the sanitizers bring their own allocator.
let allocator: [Target.Dependency] =
    Context.environment["DUO_RELAY_SYSTEM_MALLOC"] == nil ? ["CJemalloc"] : []

let package = Package(
    name: "duo-relay",
    products: [
        .executable(name: "duo-relay", targets: ["DuoRelayCLI"]),
        // For the fuzz package in Fuzz/, which can depend only on products.
        .library(name: "RelayCore", targets: ["RelayCore"]),
        .library(name: "RelayCrypto", targets: ["RelayCrypto"]),
        .library(name: "HTTP1", targets: ["HTTP1"]),
        .library(name: "JSON", targets: ["JSON"]),
        // The server connection's TLS phase (FuzzServerHandshake) and what it is driven with.
        .library(name: "HTTPServer", targets: ["HTTPServer"]),
        .library(name: "TLS", targets: ["TLS"]),
        .library(name: "MonotonicTime", targets: ["MonotonicTime"]),
        .executable(name: "duo-relay-load", targets: ["LoadGenerator"]),
        // Runs the documents' command blocks as an operator would (scripts/doc-test, scripts/container-test).
        .executable(name: "duo-relay-recipes", targets: ["RecipeRunner"]),
        // For channels: posts pushes and mints grants, with typed outcomes (Foundation only).
        .library(name: "DuoRelayClient", targets: ["DuoRelayClient"]),
    ],
    targets: [
        .systemLibrary(
            name: "COpenSSL", path: "Sources/C/COpenSSL", pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]),
        .systemLibrary(
            name: "CNGHTTP2", path: "Sources/C/CNGHTTP2", pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(
            name: "CHiredis", path: "Sources/C/CHiredis", providers: [.apt(["libhiredis-dev"])]),
        .systemLibrary(
            name: "CJemalloc", path: "Sources/C/CJemalloc", providers: [.apt(["libjemalloc-dev"])]),
        .systemLibrary(name: "CUV", path: "Sources/C/CUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
        // PKCS#11's types and function list (the header only: the operator's module is loaded with dlopen).
        .systemLibrary(name: "CPKCS11", path: "Sources/C/CPKCS11", providers: [.apt(["libp11-kit-dev"])]),
        // glibc interfaces Swift's Glibc module leaves out (epoll, timerfd, mallopt).
        .systemLibrary(name: "CSystem", path: "Sources/C/CSystem"),

        // The version (a checked-in release number) and, when built from git, the commit.
        .plugin(name: "RelayVersionPlugin", capability: .buildTool(), path: "Plugins/RelayVersionPlugin"),
        .target(
            name: "RelayVersion", path: "Sources/Base/RelayVersion", swiftSettings: strict,
            plugins: ["RelayVersionPlugin"]),
        // The one shape of every module's error (swift-asn1's): an opaque code with static members, a reason,
        // equality by code.
        .target(name: "ErrorCodes", path: "Sources/Base/ErrorCodes", swiftSettings: strict),
        // The one clock's value type: an instant in monotonic nanoseconds, pure, which every machine takes as input,
        // and the one conversion of a `Duration` to those nanoseconds.
        .target(name: "MonotonicTime", path: "Sources/Base/MonotonicTime", swiftSettings: strict),
        // TLS over OpenSSL, client and server side: the contexts (peer verification, the server's certificate),
        // sessions (the handshake step, reads and writes, ALPN), the client stream's BIO, the error queue read into
        // text, the thread-exit cleanup and throwaway certificates (LocalPKI). With RelayCrypto, the only importer of
        // COpenSSL.
        .target(
            name: "TLS", dependencies: ["COpenSSL", "ErrorCodes"], path: "Sources/Crypto/TLS", swiftSettings: strict),
        .target(
            name: "RelayCrypto", dependencies: ["COpenSSL", "TLS", "ErrorCodes"], path: "Sources/Crypto/RelayCrypto",
            swiftSettings: strict),
        // A PKCS#11 client: a module loaded once per process, a key found in a token by its labels and id, signed
        // with inside the token (CKM_ECDSA); the key never leaves it.
        .target(
            name: "PKCS11", dependencies: ["CPKCS11", "ErrorCodes"], path: "Sources/Crypto/PKCS11",
            swiftSettings: strict),
        // The one JSON reader, strict and pure: the configuration, RELAY_KEYS and APNs' GOAWAY debug data.
        .target(name: "JSON", dependencies: ["ErrorCodes"], path: "Sources/Protocols/JSON", swiftSettings: strict),
        .target(
            name: "RelayCore", dependencies: ["RelayCrypto", "JSON", "ErrorCodes", "MonotonicTime"],
            path: "Sources/Relay/RelayCore",
            swiftSettings: strict),
        .target(
            name: "HTTPServer", dependencies: ["HTTP1", "EventLoops", "TLS", "ErrorCodes", "MonotonicTime"],
            path: "Sources/Network/HTTPServer", swiftSettings: strict),
        // One libuv event loop per thread: timers, TCP listeners and connections, name resolution, signals.
        .target(
            name: "EventLoops", dependencies: ["CUV", "CSystem", "ErrorCodes", "MonotonicTime"],
            path: "Sources/Network/EventLoops",
            swiftSettings: strict),
        // HTTP/1.1, pure: the relay's front (the strict request parser and the connection state machine) and the one
        // response reader the proxy tunnel, `duo-relay push`, the load tool and the tests read answers with, on the
        // same line scanner (no I/O, no C, no clock: the event loop feeds them bytes, deadlines and answers).
        .target(
            name: "HTTP1", dependencies: ["ErrorCodes", "MonotonicTime"], path: "Sources/Protocols/HTTP1",
            swiftSettings: strict),
        .target(
            name: "DuoRelayClient", dependencies: ["ErrorCodes"], path: "Sources/Library/DuoRelayClient",
            swiftSettings: strict),
        // What the APNs client and the simulator share over nghttp2: how a session finds its owner
        // (the one ownership rule) and the header block; bodies sent a part at a time and frames written
        // to OpenSSL in batches (the simulator's).
        .target(
            name: "HTTP2Sessions", dependencies: ["CNGHTTP2", "TLS"], path: "Sources/Network/HTTP2Sessions",
            swiftSettings: strict),
        // A client connection on a loop, plain TCP or TLS (TLS's session through its stream BIO) over libuv's TCP
        // handle: what the APNs client and the Redis client read and write through.
        .target(
            name: "OutboundConnections", dependencies: ["EventLoops", "TLS", "HTTP1", "MonotonicTime", "ErrorCodes"],
            path: "Sources/Network/OutboundConnections", swiftSettings: strict),
        // The APNs client: nghttp2 sessions over OutboundConnections' ClientStream, on one event loop (its own, or a
        // worker's).
        .target(
            name: "HTTP2Client",
            dependencies: [
                "CNGHTTP2", "HTTP2Sessions", "TLS", "EventLoops", "OutboundConnections", "JSON", "ErrorCodes",
                "MonotonicTime",
            ], path: "Sources/Network/HTTP2Client",
            swiftSettings: strict),
        // The shared limits store's connection: a pure pipeline machine, and its shell on a worker's event loop
        // (hiredis's RESP reader and formatter, OutboundConnections' client stream).
        .target(
            name: "RedisClient",
            dependencies: [
                "CHiredis", "RelayCrypto", "TLS", "EventLoops", "OutboundConnections", "ErrorCodes", "MonotonicTime",
            ],
            path: "Sources/Network/RedisClient",
            swiftSettings: strict),
        .target(
            name: "APNsSimulator",
            dependencies: [
                "CNGHTTP2", "RelayCrypto", "HTTP2Sessions", "TLS", "EventLoops", "ErrorCodes", "MonotonicTime",
            ],
            path: "Sources/Simulator/APNsSimulator",
            swiftSettings: strict),
        .target(
            name: "RelayServer",
            dependencies: [
                "CSystem", "TLS", "RelayCore", "RelayCrypto", "HTTP1", "HTTPServer", "HTTP2Client", "RedisClient",
                "RelayVersion", "EventLoops", "OutboundConnections", "MonotonicTime", "PKCS11",
            ], path: "Sources/Relay/RelayServer",
            swiftSettings: strict),
        .executableTarget(
            name: "DuoRelayCLI",
            dependencies: [
                "RelayServer", "RelayCore", "RelayCrypto", "APNsSimulator", "DuoRelayClient", "RelayVersion",
                "ErrorCodes", "PushClient", "MonotonicTime",
            ] + allocator, path: "Sources/Relay/DuoRelayCLI",
            swiftSettings: strict),
        // `duo-relay push`'s client: one request to a relay and its HTTP/1.1 answer, over a connection of its own on a
        // loop (plain or TLS, a CA of the operator's beside the system's roots); the exchange's machine is pure and
        // reads the answer with HTTP1's response reader.
        .target(
            name: "PushClient", dependencies: ["DuoRelayClient", "HTTP1", "EventLoops", "OutboundConnections", "TLS"],
            path: "Sources/Relay/PushClient", swiftSettings: strict),
        // The benchmark's load generator and APNs simulator harness (scripts/bench, scripts/push-instructions).
        .executableTarget(
            name: "LoadGenerator",
            dependencies: [
                "EventLoops", "HTTP1", "RelayCore", "RelayCrypto", "RelayServer", "APNsSimulator", "TCPForwarder",
                "ErrorCodes", "OutboundConnections", "TLS",
            ], path: "Benchmarks/LoadGenerator",
            swiftSettings: strict),
        // The documents' recipes run as written: the blocks taken from README.md and the operations documents, the
        // scenarios that run them on this machine (scripts/doc-test) and in containers (scripts/container-test),
        // and what they check an operator sees.
        .executableTarget(
            name: "RecipeRunner", dependencies: ["CSystem", "DuoRelayClient", "ErrorCodes", "HTTP1", "RelayCrypto"],
            path: "Tests/Support/RecipeRunner", swiftSettings: strict),

        // The tests' shared helpers: a raw HTTP/1.1 client, bounded polling, an event recorder, the one free-port finder
        // and the waits for a listening port and for a log line, the failure type, hex, the test PKI, sockets.
        .target(
            name: "RelayTestSupport",
            dependencies: ["APNsSimulator", "ErrorCodes", "HTTP1", "MonotonicTime", "TCPForwarder"],
            path: "Tests/Support/RelayTestSupport", swiftSettings: strict),
        // A TCP forwarder on loopback that delays, resets or forgets connections: the benchmark's Redis hop and
        // the tests' network faults (its listener is the tests' loopback listener too).
        .target(
            name: "TCPForwarder", dependencies: ["ErrorCodes", "MonotonicTime"], path: "Sources/Simulator/TCPForwarder",
            swiftSettings: strict),
        .testTarget(
            name: "RelayCryptoTests", dependencies: ["RelayCrypto", "ErrorCodes", "RelayTestSupport"],
            swiftSettings: strict),
        // The PKCS#11 client against SoftHSM tokens (softhsm2, from scripts/install-deps --test).
        .testTarget(
            name: "PKCS11Tests", dependencies: ["PKCS11", "RelayCrypto", "RelayTestSupport"], swiftSettings: strict),
        .testTarget(name: "JSONTests", dependencies: ["JSON", "ErrorCodes"], swiftSettings: strict),
        .testTarget(
            name: "RelayCoreTests", dependencies: ["RelayCore", "RelayCrypto", "RelayTestSupport", "MonotonicTime"],
            swiftSettings: strict),
        .testTarget(
            name: "HTTP1Tests", dependencies: ["HTTP1", "MonotonicTime", "RelayTestSupport"], swiftSettings: strict),
        .testTarget(
            name: "HTTPServerTests", dependencies: ["HTTPServer", "HTTP1", "EventLoops", "RelayTestSupport"],
            swiftSettings: strict),
        // The relay's HTTP handler driven in-process with a manual clock (no sockets, no sleeps), and one
        // relay with a Redis limits store on loopback (its limiters freed when it stops).
        .testTarget(
            name: "RelayServerTests",
            dependencies: [
                "RelayServer", "RelayCore", "RelayCrypto", "HTTP1", "HTTPServer", "RedisTestSupport",
                "RelayTestSupport", "EventLoops",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "HTTP2ClientTests",
            dependencies: [
                "HTTP2Client", "HTTP2Sessions", "EventLoops", "MonotonicTime", "APNsSimulator", "RelayTestSupport",
            ],
            swiftSettings: strict),
        // The TLS module's pieces without sockets: ALPN's lists, and the stream BIO between a client and a server
        // session.
        .testTarget(name: "TLSTests", dependencies: ["TLS"], swiftSettings: strict),
        // A throwaway redis-server and redis-sentinel for the tests (RedisClientTests, EndToEndTests).
        .target(
            name: "RedisTestSupport", dependencies: ["ErrorCodes", "RelayTestSupport"],
            path: "Tests/Support/RedisTestSupport",
            swiftSettings: strict),
        .testTarget(
            name: "RedisClientTests",
            dependencies: [
                "RedisClient", "RelayCore", "RedisTestSupport", "RelayTestSupport", "TCPForwarder", "EventLoops",
                "MonotonicTime",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "APNsSimulatorTests",
            dependencies: [
                "APNsSimulator", "RelayCrypto", "HTTP2Client", "CSystem", "RelayCore", "RelayTestSupport",
                "TCPForwarder", "MonotonicTime",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "RelayCore", "RelayCrypto", "APNsSimulator", "DuoRelayCLI", "DuoRelayClient", "RedisTestSupport",
                "RelayServer", "HTTP2Client", "MonotonicTime", "RelayTestSupport", "TCPForwarder",
            ],
            swiftSettings: strict),
        .testTarget(name: "DeploymentTests", dependencies: ["RelayTestSupport"], swiftSettings: strict),
        .testTarget(
            name: "EventLoopsTests", dependencies: ["EventLoops", "MonotonicTime", "RelayTestSupport"],
            swiftSettings: strict),
        .testTarget(
            name: "OutboundConnectionsTests",
            dependencies: [
                "OutboundConnections", "EventLoops", "TLS", "HTTP1", "APNsSimulator", "RelayCrypto", "MonotonicTime",
                "RelayTestSupport",
            ],
            swiftSettings: strict),
        .testTarget(name: "DuoRelayClientTests", dependencies: ["DuoRelayClient"], swiftSettings: strict),
        // The push client's exchange machine and how it reads answers, without sockets.
        .testTarget(name: "PushClientTests", dependencies: ["PushClient", "DuoRelayClient"], swiftSettings: strict),
        // The benchmark's readings (strace, h2load) and its report, without running a benchmark.
        .testTarget(
            name: "LoadGeneratorTests", dependencies: ["LoadGenerator", "EventLoops", "HTTP1", "HTTPServer", "TLS"],
            swiftSettings: strict),
        .testTarget(name: "RecipeRunnerTests", dependencies: ["RecipeRunner"], swiftSettings: strict),
    ]
)
