// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "FMDBCipher",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "FMDB", targets: ["FMDB"]),
        // FMDB as a swift-service-lifecycle service with swift-metrics statistics: its own product, so that
        // a program that imports FMDB alone gains no dependency.
        .library(name: "FMDBService", targets: ["FMDBService"]),
        .executable(name: "fmdb-cipher", targets: ["fmdb-cipher"]),
        // The crypto provider alone, for Benchmarks' bench-c (raw C with the library's provider).
        .library(name: "CFMDBCrypto", targets: ["CFMDBCrypto"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        // FMDBService only: the Service protocol, graceful shutdown and SIGHUP; the metrics API.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        // `swift package generate-documentation` (Scripts/docs); a plugin only: nothing links it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // SQLCipher's C API, found through pkg-config `sqlcipher` (Debian: libsqlcipher-dev).
        .systemLibrary(
            name: "CSQLCipher",
            pkgConfig: "sqlcipher",
            providers: [.apt(["libsqlcipher-dev"])]
        ),
        // OpenSSL's libcrypto: key derivation, random bytes, OPENSSL_cleanse.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // FMDBCipher's SQLCipher crypto provider (C, OpenSSL 3 EVP): BENCHMARKS.md "SQLCipher crypto provider".
        .target(name: "CFMDBCrypto", dependencies: ["COpenSSL", "CSQLCipher"]),
        // The provider's known-answer self-test, for the tests only: the shipped library does not carry it.
        .target(
            name: "CFMDBCryptoSelfTest", dependencies: ["CFMDBCrypto", "COpenSSL"],
            cSettings: [.headerSearchPath("../CFMDBCrypto")]   // callbacks.h: the provider's internal callbacks
        ),
        .target(
            name: "FMDB",
            dependencies: [
                "CSQLCipher",
                "COpenSSL",
                "CFMDBCrypto",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The service layer over FMDB's pool: run until graceful shutdown, reload the key, statistics, metrics.
        .target(
            name: "FMDBService",
            dependencies: [
                "FMDB",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Linux calls the tool needs that Swift cannot import (prctl, the signal handler): C, for fmdb-cipher only.
        .target(name: "CToolSupport"),
        .target(
            name: "TestSupport",
            dependencies: ["FMDB", .product(name: "Logging", package: "swift-log")],
            path: "Tests/TestSupport",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "fmdb-cipher",
            dependencies: ["FMDB", "CToolSupport", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "fmdb-test-helper",
            dependencies: ["FMDB"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The tests, one target per kind of test; Scripts/test selects the sanitizer runs by target:
        // FMDB's API on plain databases: FMDB's own test suite (ported), Codable rows, prepared statements, fuzzing.
        .testTarget(
            name: "DatabaseTests",
            dependencies: ["FMDB", "TestSupport"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Test targets that run a built executable declare it, so SwiftPM builds it beside the test bundle
        // (TestSupport's builtProduct looks there and nowhere else).
        // Encryption, keys, key providers and key slots in this process (no sanitizer exclusion).
        .testTarget(
            name: "CipherTests",
            dependencies: ["FMDB", "TestSupport", "CFMDBCryptoSelfTest", "fmdb-cipher", "fmdb-test-helper"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Queues, pools and connections on several threads at once: also run under ThreadSanitizer.
        .testTarget(
            name: "ConcurrencyTests",
            dependencies: ["FMDB", "TestSupport", "CFMDBCryptoSelfTest", "fmdb-cipher", "fmdb-test-helper"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Child processes killed mid-write and other programs on our files (the sqlcipher shell, Python):
        // left out of the AddressSanitizer run, for time (the plain runs cover them).
        .testTarget(
            name: "ProcessTests",
            dependencies: ["FMDB", "TestSupport", "CFMDBCryptoSelfTest", "fmdb-cipher", "fmdb-test-helper"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The fmdb-cipher tool, end to end on the built binary: left out of the AddressSanitizer run.
        .testTarget(
            name: "ToolTests",
            dependencies: ["FMDB", "TestSupport", "CFMDBCryptoSelfTest", "fmdb-cipher", "fmdb-test-helper"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The service layer (FMDBService) under a real ServiceGroup, with its metrics: tasks and Dispatch threads
        // at once, also run under ThreadSanitizer; in this process, so also under AddressSanitizer.
        .testTarget(
            name: "ServiceTests",
            dependencies: [
                "FMDB", "FMDBService", "TestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
