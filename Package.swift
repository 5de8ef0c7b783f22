// swift-tools-version:6.1
import PackageDescription

// VaultSync: an offline-first, end-to-end-encrypted password-vault sync engine.
// Layers (each depends only on the ones above it):
//   VaultCrypto → VaultModels → VaultSyncCore → VaultStore / VaultAPI → VaultClient → vaultsync (CLI)
//   VaultModels → VaultServer → vaultsync-server
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
        .executable(name: "vaultsync", targets: ["vaultsync"]),
        .executable(name: "VaultBench", targets: ["VaultBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        // Argon2id comes from the reference implementation (Debian: libargon2-dev, Homebrew: argon2).
        .systemLibrary(
            name: "CArgon2",
            pkgConfig: "libargon2",
            providers: [.apt(["libargon2-dev"]), .brew(["argon2"])]
        ),
        .target(
            name: "VaultCrypto",
            dependencies: [
                "CArgon2",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "VaultModels",
            dependencies: ["VaultCrypto"],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "vaultsync",
            dependencies: [
                "VaultCrypto", "VaultModels",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "VaultBench",
            dependencies: [
                "VaultCrypto", "VaultModels",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VaultCryptoTests",
            dependencies: ["VaultCrypto"],
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
