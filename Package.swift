// swift-tools-version:6.1
import PackageDescription

// VaultSync: an offline-first, end-to-end-encrypted password-vault sync engine.
// Layers (each depends only on the ones above it):
//   VaultCrypto → VaultModels → VaultSyncCore → VaultStore / VaultAPI → VaultClient → vaultsync (CLI)
//   VaultModels → VaultExchange (import/export formats) → VaultClient
//   VaultModels → VaultServer → vaultsync-server
//   VaultAgent (the agent's socket: frames and peers, no vault) → vaultsync
let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "VaultSync",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "VaultCrypto", targets: ["VaultCrypto"]),
        .library(name: "VaultModels", targets: ["VaultModels"]),
        .library(name: "VaultSyncCore", targets: ["VaultSyncCore"]),
        .library(name: "VaultExchange", targets: ["VaultExchange"]),
        .library(name: "VaultClient", targets: ["VaultClient"]),
        .library(name: "VaultServer", targets: ["VaultServer"]),
        .executable(name: "vaultsync", targets: ["vaultsync"]),
        .executable(name: "vaultsync-cli", targets: ["vaultsync-cli"]),
        .executable(name: "vaultsync-server", targets: ["vaultsync-server"]),
        .executable(name: "VaultBench", targets: ["VaultBench"]),
        .executable(name: "VaultBenchFloor", targets: ["VaultBenchFloor"]),
        .executable(name: "VaultBenchSocketFloor", targets: ["VaultBenchSocketFloor"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        // The notifications hub (live sync): the server's WebSocket upgrade, and the tests' WebSocket client.
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // TLS: the server's optional TLS (NIOSSL, as HummingbirdTLS uses), test certificates
        // (VaultTestSupport), the client's extra trust roots and certificate diagnosis (VaultAPI).
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        // The server's /metrics in Prometheus' text format (VaultServer).
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // The notifications hub's WebSocket client (VaultAPI).
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.2"),
    ],
    targets: [
        // Argon2id: the reference implementation, vendored and compiled in, so no platform needs a
        // system library (iOS has none). See Sources/CArgon2Reference/argon2_reference.c.
        .target(
            name: "CArgon2Reference",
            exclude: ["phc-winner-argon2"],
            cSettings: [.headerSearchPath("phc-winner-argon2/include")]
        ),
        .target(
            name: "VaultCrypto",
            dependencies: [
                "CArgon2Reference",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        // What both executables need before their commands run: the command line as ArgumentParser should read it.
        .target(
            name: "CommandLineSupport",
            dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strict
        ),
        .target(
            name: "VaultModels",
            dependencies: ["VaultCrypto"],
            swiftSettings: strict
        ),
        // Import and export formats: pure conversions between files and decrypted items, no I/O.
        .target(
            name: "VaultExchange",
            dependencies: ["VaultModels", "VaultCrypto"],
            swiftSettings: strict
        ),
        .target(
            name: "VaultSyncCore",
            dependencies: ["VaultModels", "VaultCrypto"],
            swiftSettings: strict
        ),
        .target(
            name: "VaultStore",
            dependencies: [
                "VaultModels", "VaultSyncCore", "VaultCrypto",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        .target(
            // A small HTTP/1.1 server over SwiftNIO for local APIs (bw serve): NIO is in the command line's
            // executable already (AsyncHTTPClient), a framework's router is not.
            name: "LocalHTTP",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "VaultAPI",
            dependencies: [
                "VaultCrypto", "VaultModels", "VaultSyncCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                // TLS trust: extra authorities, and the diagnosis of a refused certificate (ServerTrust.swift).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "WSClient", package: "swift-websocket"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "VaultClient",
            dependencies: [
                "VaultModels", "VaultSyncCore", "VaultStore", "VaultAPI", "VaultCrypto", "VaultExchange",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "VaultServer",
            dependencies: [
                "VaultModels", "VaultCrypto",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: strict
        ),
        // Starting child processes with posix_spawn (the editor, the clipboard tools, the agent; the tests'
        // children): no dependency, below everything that starts a program.
        .target(
            name: "ProcessSpawn",
            swiftSettings: strict
        ),
        .target(
            name: "VaultTestSupport",
            dependencies: [
                "VaultServer", "VaultCrypto", "ProcessSpawn",
                // The deterministic simulation's in-process server: the API's transport seam, the router test framework.
                "VaultAPI",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "vaultsync-crash-helper",
            dependencies: ["VaultClient", "VaultModels"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "vaultsync-server",
            dependencies: [
                "VaultServer", "CommandLineSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        // The agent's socket: framing, the Unix domain socket server with its peer check, the client.
        // Below the CLI, beside the engine: it knows nothing of vaults, only of frames and peers.
        // SCM_RIGHTS: a command hands the agent its standard input, output and error (the CMSG macros are C only).
        .target(name: "CDescriptorPassing"),
        // Where a profile and its agent live, the framing, a client's connection: POSIX only, no Foundation,
        // so that the command line's front can reach the agent before anything larger is loaded.
        .target(
            name: "AgentLink",
            dependencies: ["CDescriptorPassing"],
            swiftSettings: strict
        ),
        .target(
            name: "VaultAgent",
            dependencies: ["AgentLink", "CDescriptorPassing", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        // `vaultsync` as typed: hands the command to the profile's agent when one runs and takes it, else
        // becomes `vaultsync-cli` (execv), built beside it. Not a dependency on vaultsync-cli: SwiftPM would
        // link that executable's code (and Foundation) into this one, which must load nothing but the runtime.
        .executableTarget(
            name: "vaultsync",
            dependencies: ["AgentLink", "CDescriptorPassing"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "vaultsync-cli",
            dependencies: [
                "VaultCrypto", "VaultModels", "VaultSyncCore", "VaultClient", "VaultAPI", "VaultExchange", "AgentLink", "VaultAgent", "ProcessSpawn", "LocalHTTP",
                // Not VaultServer: `vaultsync demo` runs the vaultsync-server executable, so no command loads and binds the
                // server's code at start (it was a fifth of their relocations and protocol records; commit 79872c8).
                "CommandLineSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "VaultBench",
            dependencies: [
                "VaultCrypto", "VaultModels", "VaultClient", "VaultAPI", "VaultStore", "VaultServer", "VaultTestSupport", "AgentLink", "LocalHTTP",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        // The floor of VaultBench's command-line rows (P7): the least a Swift program must link and do
        // to read one item of a profile (see docs/BENCHMARKS.md, P7).
        .executableTarget(
            name: "VaultBenchFloor",
            dependencies: [
                "VaultCrypto", "VaultModels",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        // The floor of the agent rows (G1): one request over the agent's socket, from a program that loads
        // only the Swift runtime.
        .executableTarget(
            name: "VaultBenchSocketFloor",
            dependencies: ["AgentLink"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VaultCryptoTests",
            dependencies: ["VaultCrypto", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VaultSyncCoreTests",
            dependencies: ["VaultSyncCore", "VaultModels"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VaultClientTests",
            dependencies: [
                "VaultClient", "VaultStore", "VaultAPI", "VaultSyncCore", "VaultModels", "VaultCrypto", "VaultTestSupport", "VaultServer",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // TLSTrustTests: a TLS endpoint presenting the test certificates.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VaultCLITests",
            dependencies: [
                "VaultClient", "VaultAPI", "VaultModels", "VaultCrypto", "VaultExchange", "VaultTestSupport", "VaultServer", "CommandLineSupport",
                "LocalHTTP",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VaultAgentTests",
            dependencies: ["AgentLink", "VaultAgent", "VaultTestSupport", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VaultReliabilityTests",
            dependencies: [
                "VaultClient", "VaultStore", "VaultSyncCore", "VaultModels", "VaultCrypto", "VaultTestSupport", "VaultAPI",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VaultServerTests",
            dependencies: [
                "VaultServer", "VaultModels", "VaultCrypto", "VaultTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                // NotificationHubTests: a real WebSocket client against the hub.
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VaultSecurityTests",
            dependencies: [
                "VaultClient", "VaultAPI", "VaultStore", "VaultModels", "VaultCrypto", "VaultServer", "VaultTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VaultExchangeTests",
            dependencies: [
                "VaultExchange", "VaultModels", "VaultCrypto",
                // The encrypted export is decrypted in the tests with these primitives, not with our EncString.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            resources: [.copy("Fixtures")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VaultModelsTests",
            dependencies: [
                "VaultModels", "VaultCrypto",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: strict
        ),
    ]
)
