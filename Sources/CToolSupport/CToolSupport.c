#define _GNU_SOURCE
#include "CToolSupport.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int fmdb_tool_disable_core_dumps(void) {
    struct rlimit none = {0, 0};
    int limit = setrlimit(RLIMIT_CORE, &none);
    int dumpable = prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    return (limit == 0 && dumpable == 0) ? 0 : -1;
}

#define CLEANUP_SLOTS 8
#define CLEANUP_PATH_MAX 4096

static char cleanup_paths[CLEANUP_SLOTS][CLEANUP_PATH_MAX];
static volatile sig_atomic_t cleanup_in_use[CLEANUP_SLOTS];

struct fmdb_dirent64 {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int is_dot_or_dot_dot(const char *name) {
    return name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0));
}

/* Async-signal-safe: no malloc, no stdio, no locks. */
int fmdb_tool_remove_private_directory(const char *directory) {
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) return errno == ENOENT ? 0 : -1;
        char buffer[4096] __attribute__((aligned(8)));
        for (;;) {
            long count = syscall(SYS_getdents64, fd, buffer, sizeof buffer);
            if (count <= 0) break;
            for (long offset = 0; offset < count;) {
                struct fmdb_dirent64 *entry = (struct fmdb_dirent64 *)(buffer + offset);
                if (!is_dot_or_dot_dot(entry->d_name)) unlinkat(fd, entry->d_name, 0);
                offset += entry->d_reclen;
            }
        }
        close(fd);
        /* Another thread may have made a file (a journal) meanwhile: then try again. */
        if (rmdir(directory) == 0 || errno == ENOENT) return 0;
    }
    return -1;
}

static void cleanup_and_exit(int number) {
    for (int slot = 0; slot < CLEANUP_SLOTS; slot++) {
        if (cleanup_in_use[slot]) fmdb_tool_remove_private_directory(cleanup_paths[slot]);
    }
    _exit(128 + number);
}

int fmdb_tool_install_cleanup_handlers(void) {
    const int numbers[] = {SIGINT, SIGTERM, SIGHUP};
    for (unsigned i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        struct sigaction current;
        if (sigaction(numbers[i], NULL, &current) != 0) return -1;
        if (current.sa_handler == SIG_IGN) continue;
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = cleanup_and_exit;
        sigfillset(&action.sa_mask);
        if (sigaction(numbers[i], &action, NULL) != 0) return -1;
    }
    return 0;
}

int fmdb_tool_cleanup_register(const char *directory) {
    size_t length = strlen(directory);
    if (length >= CLEANUP_PATH_MAX) return -1;
    for (int slot = 0; slot < CLEANUP_SLOTS; slot++) {
        if (cleanup_in_use[slot]) continue;
        memcpy(cleanup_paths[slot], directory, length + 1);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        cleanup_in_use[slot] = 1;
        return slot;
    }
    return -1;
}

void fmdb_tool_cleanup_unregister(int slot) {
    if (slot >= 0 && slot < CLEANUP_SLOTS) cleanup_in_use[slot] = 0;
}

int fmdb_tool_is_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
}

int fmdb_tool_rename_noreplace(const char *from, const char *to) {
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) return -1;
    if (link(from, to) != 0) return -1;
    unlink(from);
    return 0;
}
