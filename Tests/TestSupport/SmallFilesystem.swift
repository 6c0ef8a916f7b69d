import Foundation
import XCTest

/// A real full disk and a real read-only filesystem: a 256 KiB tmpfs mounted for one test, under the
/// system's temporary directory (root only; CI runs as root). Unmount it in `tearDown`.
public final class SmallFilesystem {
    /// Where it is mounted.
    public let path: String

    /// Mounts it; throws `XCTSkip` when not root, without `mount`, or when the mount is refused.
    public init() throws {
        guard getuid() == 0, let mount = which("mount") else {
            throw XCTSkip("needs root to mount a size-limited tmpfs")
        }
        let point = FileManager.default.temporaryDirectory.appendingPathComponent("fmdb-full-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: point, withIntermediateDirectories: true)
        let result = try runProcess(mount, ["-t", "tmpfs", "-o", "size=256k", "tmpfs", point])
        guard result.status == 0 else {
            try? FileManager.default.removeItem(atPath: point)
            throw XCTSkip("mount refused: \(result.stderr)")
        }
        path = point
    }

    /// Remounts it read-only; true when that worked.
    public func remountReadOnly() throws -> Bool {
        let mount = try XCTUnwrap(which("mount"))
        return try runProcess(mount, ["-o", "remount,ro", path]).status == 0
    }

    /// Unmounts it and removes its mount point.
    public func unmount() {
        if let umount = which("umount") {
            _ = try? runProcess(umount, [path])
            try? FileManager.default.removeItem(atPath: path)
        }
    }
}
