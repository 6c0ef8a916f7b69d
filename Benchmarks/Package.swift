// swift-tools-version:6.1
// The benchmark suite: this library against raw C calls to SQLCipher and against GRDB, as ratios
// measured side by side in one run (Scripts/bench). Its own package, so library users never resolve GRDB.
// Each executable links exactly one SQLite: bench-c and bench-fmdb link libsqlcipher, bench-grdb the
// system libsqlite3 (the two libraries must never meet in one process).
import PackageDescription

let package = Package(
    name: "FMDBCipherBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "FMDBCipher", path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "bench-c",
            dependencies: [.product(name: "CFMDBCrypto", package: "FMDBCipher")],
            cSettings: [.define("SQLITE_HAS_CODEC"), .unsafeFlags(["-O2"])],
            linkerSettings: [.linkedLibrary("sqlcipher")]
        ),
        .target(name: "BenchSupport", swiftSettings: [.swiftLanguageMode(.v6)]),
        .executableTarget(
            name: "bench-fmdb",
            dependencies: ["BenchSupport", .product(name: "FMDB", package: "FMDBCipher")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "bench-grdb",
            dependencies: ["BenchSupport", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
