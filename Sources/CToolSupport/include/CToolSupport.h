#ifndef FMDB_CIPHER_TOOL_SUPPORT_H
#define FMDB_CIPHER_TOOL_SUPPORT_H

/// Linux calls the fmdb-cipher tool needs that Swift cannot import directly (variadic, or declared
/// only under _GNU_SOURCE). Each returns 0 on success, -1 with errno set on failure.

/// rename(2) that fails with EEXIST instead of replacing `to` (renameat2 with RENAME_NOREPLACE).
/// Fails with EINVAL or ENOSYS where the file system or kernel does not support it.
int fmdb_tool_rename_noreplace(const char *from, const char *to);

/// No core dumps: RLIMIT_CORE 0 (soft and hard) and prctl(PR_SET_DUMPABLE, 0), which also makes
/// /proc/PID/environ and /proc/PID/mem unreadable to other processes of the same user.
int fmdb_tool_disable_core_dumps(void);

/// prctl(PR_GET_DUMPABLE): 0 or 1, or -1.
int fmdb_tool_is_dumpable(void);

#endif
