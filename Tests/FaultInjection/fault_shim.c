// An LD_PRELOAD shim for the fault-injection tests: fails, or kills the process at, the Nth file-system
// call that changes a file under a given folder. Built by the tests themselves (FaultSweep.swift), never
// shipped.
//
// Environment:
//   FMDB_FAULT_DIR     only calls on files under this folder count (absolute path; required)
//   FMDB_FAULT_AT      the 1-based number of the counted call to act on; 0 or unset: only count
//   FMDB_FAULT_MODE    eio     that call fails with EIO (once)
//                      enospc  that call fails with ENOSPC (once)
//                      full    that call and every later write, sync and rename fail with ENOSPC
//                      kill    the process is SIGKILLed before that call runs
//   FMDB_FAULT_LOG     a file that gets one line per counted call ("N op path"), for the sweep's plan
//
// Counted calls: write, pwrite, pwrite64, writev, fsync, fdatasync, ftruncate, rename, renameat,
// renameat2, link, linkat, unlink, unlinkat.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

// The libc function this shim wraps, looked up once.
#define REAL(name)                                                                                             \
    static __typeof__(&name) real_##name;                                                                      \
    if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

static long counted;
static int full;

static const char *fault_dir(void) {
    const char *dir = getenv("FMDB_FAULT_DIR");
    return (dir && *dir) ? dir : NULL;
}

static int under_dir(const char *path) {
    const char *dir = fault_dir();
    if (!dir || !path) return 0;
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == 0);
}

static int fd_under_dir(int fd) {
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    return under_dir(target);
}

static void log_call(const char *op, const char *path) {
    const char *log = getenv("FMDB_FAULT_LOG");
    if (!log || !*log) return;
    REAL(write);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;
    char line[PATH_MAX + 64];
    int len = snprintf(line, sizeof line, "%ld %s %s\n", counted, op, path ? path : "-");
    if (len > 0) real_write(fd, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
    close(fd);
}

// Whether this counted call must fail; sets errno. Kills the process when asked.
static int inject(const char *op, const char *path, int is_write_like) {
    counted++;
    log_call(op, path);
    if (full && is_write_like) {
        errno = ENOSPC;
        return 1;
    }
    const char *at = getenv("FMDB_FAULT_AT");
    long target = at ? atol(at) : 0;
    if (target <= 0 || counted != target) return 0;
    const char *mode = getenv("FMDB_FAULT_MODE");
    if (!mode) return 0;
    if (strcmp(mode, "kill") == 0) {
        raise(SIGKILL);
    } else if (strcmp(mode, "eio") == 0) {
        errno = EIO;
        return 1;
    } else if (strcmp(mode, "enospc") == 0) {
        errno = ENOSPC;
        return 1;
    } else if (strcmp(mode, "full") == 0) {
        full = 1;
        errno = ENOSPC;
        return 1;
    }
    return 0;
}

static char *fd_path(int fd, char *buffer, size_t size) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buffer, size - 1);
    if (n <= 0) return NULL;
    buffer[n] = 0;
    return buffer;
}


#define FD_CALL(op, fd, write_like)                                              \
    do {                                                                         \
        if (fault_dir() && fd_under_dir(fd)) {                                   \
            char p[PATH_MAX];                                                    \
            if (inject(op, fd_path(fd, p, sizeof p), write_like)) return -1;     \
        }                                                                        \
    } while (0)

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(write);
    FD_CALL("write", fd, 1);
    return real_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite);
    FD_CALL("pwrite", fd, 1);
    return real_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
    REAL(pwrite64);
    FD_CALL("pwrite64", fd, 1);
    return real_pwrite64(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    REAL(writev);
    FD_CALL("writev", fd, 1);
    return real_writev(fd, iov, iovcnt);
}

int fsync(int fd) {
    REAL(fsync);
    FD_CALL("fsync", fd, 1);
    return real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(fdatasync);
    FD_CALL("fdatasync", fd, 1);
    return real_fdatasync(fd);
}

int ftruncate(int fd, off_t length) {
    REAL(ftruncate);
    FD_CALL("ftruncate", fd, 1);
    return real_ftruncate(fd, length);
}

int ftruncate64(int fd, off64_t length) {
    REAL(ftruncate64);
    FD_CALL("ftruncate64", fd, 1);
    return real_ftruncate64(fd, length);
}

static const char *absolute(int dirfd, const char *path, char *buffer, size_t size) {
    if (!path) return NULL;
    if (path[0] == '/') return path;
    char base[PATH_MAX];
    if (dirfd == AT_FDCWD) {
        if (!getcwd(base, sizeof base)) return path;
    } else if (!fd_path(dirfd, base, sizeof base)) {
        return path;
    }
    snprintf(buffer, size, "%s/%s", base, path);
    return buffer;
}

#define PATH_CALL(op, dirfd, path, write_like)                                   \
    do {                                                                         \
        char b[PATH_MAX * 2];                                                    \
        const char *a = absolute(dirfd, path, b, sizeof b);                      \
        if (under_dir(a) && inject(op, a, write_like)) return -1;                \
    } while (0)

int rename(const char *oldpath, const char *newpath) {
    REAL(rename);
    PATH_CALL("rename", AT_FDCWD, newpath, 1);
    return real_rename(oldpath, newpath);
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    REAL(renameat);
    PATH_CALL("renameat", newdirfd, newpath, 1);
    return real_renameat(olddirfd, oldpath, newdirfd, newpath);
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    REAL(renameat2);
    PATH_CALL("renameat2", newdirfd, newpath, 1);
    return real_renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
}

int link(const char *oldpath, const char *newpath) {
    REAL(link);
    PATH_CALL("link", AT_FDCWD, newpath, 1);
    return real_link(oldpath, newpath);
}

int linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags) {
    REAL(linkat);
    PATH_CALL("linkat", newdirfd, newpath, 1);
    return real_linkat(olddirfd, oldpath, newdirfd, newpath, flags);
}

int unlink(const char *path) {
    REAL(unlink);
    PATH_CALL("unlink", AT_FDCWD, path, 0);
    return real_unlink(path);
}

int unlinkat(int dirfd, const char *path, int flags) {
    REAL(unlinkat);
    PATH_CALL("unlinkat", dirfd, path, 0);
    return real_unlinkat(dirfd, path, flags);
}
