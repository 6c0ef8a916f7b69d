#ifndef FMDB_CIPHER_TOOL_SUPPORT_H
#define FMDB_CIPHER_TOOL_SUPPORT_H

/// Linux calls the fmdb-cipher tool needs that Swift cannot import directly (variadic, or declared
/// only under _GNU_SOURCE). Each returns 0 on success, -1 with errno set on failure.

/// No core dumps: RLIMIT_CORE 0 (soft and hard) and prctl(PR_SET_DUMPABLE, 0), which also makes
/// /proc/PID/environ and /proc/PID/mem unreadable to other processes of the same user.
int fmdb_tool_disable_core_dumps(void);

/// prctl(PR_GET_DUMPABLE): 0 or 1, or -1.
int fmdb_tool_is_dumpable(void);

/// Clean-up on SIGINT, SIGTERM and SIGHUP: the handler removes every entry of each registered private
/// directory and the directory itself (async-signal-safe calls only: open, getdents64, unlinkat, rmdir),
/// then _exit(128 + signal). Signals the process ignores (nohup, a background job) stay ignored.
int fmdb_tool_install_cleanup_handlers(void);

/// Registers `directory` (a copy's private directory, as FMDatabaseCopy reports it, holding only its
/// files) for removal by the handler; returns its slot (>= 0), or -1 when all slots are taken or the path is too long.
int fmdb_tool_cleanup_register(const char *directory);

/// The handler no longer removes the directory registered in `slot`.
void fmdb_tool_cleanup_unregister(int slot);

/// Removes the entries of `directory` and the directory, as the handler does; 0 when it is gone.
int fmdb_tool_remove_private_directory(const char *directory);

/// rename(2) that fails with EEXIST instead of replacing `to` (renameat2 with RENAME_NOREPLACE), or, where the
/// file system or kernel cannot (EINVAL, ENOSYS, EOPNOTSUPP), link(2) + unlink(2), which fail the same way.
int fmdb_tool_rename_noreplace(const char *from, const char *to);

#endif
