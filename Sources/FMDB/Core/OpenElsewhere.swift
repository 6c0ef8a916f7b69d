import Foundation

/// Which other processes have a file open (for a migration in place, which must not replace a file another
/// process goes on writing to), read from `/proc/<pid>/fd` (Linux): every descriptor that
/// resolves to the same device and inode. Processes whose descriptors this user may not read are counted
/// apart: for them the answer is "could not check", never "not open".
struct OpenElsewhere {
    /// Process ids that hold the file open (this process left out).
    var holders: [Int32] = []
    /// How many processes' descriptor tables could not be read (another user's, without privilege).
    var unreadable = 0

    static func check(_ path: String) -> OpenElsewhere? {
        var target = stat()
        guard stat(path, &target) == 0 else { return nil }
        var result = OpenElsewhere()
        let own = getpid()
        guard let processes = opendir("/proc") else { return nil }
        defer { closedir(processes) }
        while let entry = readdir(processes) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let pid = Int32(name), pid != own else { continue }
            guard let descriptors = opendir("/proc/\(pid)/fd") else {
                // The process may have ended meanwhile (ENOENT): nothing to count.
                if errno == EACCES || errno == EPERM { result.unreadable += 1 }
                continue
            }
            defer { closedir(descriptors) }
            while let fd = readdir(descriptors) {
                let fdName = withUnsafeBytes(of: fd.pointee.d_name) {
                    String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
                }
                guard Int(fdName) != nil else { continue }
                var info = stat()
                // stat follows the descriptor's magic link to the open file itself, even when it was renamed.
                guard stat("/proc/\(pid)/fd/\(fdName)", &info) == 0 else { continue }
                if info.st_dev == target.st_dev, info.st_ino == target.st_ino {
                    result.holders.append(pid)
                    break
                }
            }
        }
        return result
    }
}
