// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "NotesService",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "notes-service", targets: ["NotesService"])
    ],
    dependencies: [
        // The repository this example lives in: FMDB, as a user's Package.swift would name FMDBCipher.
        .package(name: "FMDBCipher", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // GET /metrics: the database service's swift-metrics in Prometheus' text format.
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // The store and the HTTP routes, a library so that the tests run them in their own process.
        .target(
            name: "NotesStore",
            dependencies: [
                .product(name: "FMDB", package: "FMDBCipher"),
                .product(name: "FMDBService", package: "FMDBCipher"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "NotesService",
            dependencies: ["NotesStore"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "NotesServiceTests",
            dependencies: [
                "NotesStore",
                .product(name: "FMDB", package: "FMDBCipher"),
                .product(name: "FMDBService", package: "FMDBCipher"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
