// swift-tools-version:6.1
// A libFuzzer target over the FMDB API (Scripts/fuzz builds it with -sanitize=fuzzer,address).
// Its own package so the library's build and tests never need the fuzzer runtime.
import PackageDescription

let package = Package(
    name: "FMDBCipherFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "FMDBCipher", path: "..")],
    targets: [
        .executableTarget(
            name: "fmdb-fuzz",
            dependencies: [.product(name: "FMDB", package: "FMDBCipher")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
