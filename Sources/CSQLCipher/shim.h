#ifndef FMDB_CSQLCIPHER_SHIM_H
#define FMDB_CSQLCIPHER_SHIM_H

// SQLCipher's header only declares sqlite3_key/sqlite3_rekey when SQLITE_HAS_CODEC is set.
#ifndef SQLITE_HAS_CODEC
#define SQLITE_HAS_CODEC 1
#endif
#include <sqlcipher/sqlite3.h>

// SQLITE_TRANSIENT is a cast of -1 to a function pointer, which Swift cannot import.
// These wrappers let Swift bind text and blobs that SQLite copies at once.
static inline int fmdb_bind_text_transient(sqlite3_stmt *stmt, int index, const char *text, sqlite3_uint64 length) {
    return sqlite3_bind_text64(stmt, index, text, length, SQLITE_TRANSIENT, SQLITE_UTF8);
}

static inline int fmdb_bind_blob_transient(sqlite3_stmt *stmt, int index, const void *bytes, sqlite3_uint64 length) {
    return sqlite3_bind_blob64(stmt, index, bytes, length, SQLITE_TRANSIENT);
}

static inline void fmdb_result_text_transient(sqlite3_context *context, const char *text, sqlite3_uint64 length) {
    sqlite3_result_text64(context, text, length, SQLITE_TRANSIENT, SQLITE_UTF8);
}

static inline void fmdb_result_blob_transient(sqlite3_context *context, const void *bytes, sqlite3_uint64 length) {
    sqlite3_result_blob64(context, bytes, length, SQLITE_TRANSIENT);
}

// sqlite3_db_config is variadic; Swift cannot call it directly.
static inline int fmdb_db_config_int(sqlite3 *db, int op, int value, int *result) {
    return sqlite3_db_config(db, op, value, result);
}

// sqlite3_config is variadic too. SQLITE_CONFIG_MEMSTATUS must be set before sqlite3_initialize.
static inline int fmdb_config_memstatus(int enabled) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, enabled);
}

// rename(2) that fails with EEXIST instead of replacing `to` (renameat2 with RENAME_NOREPLACE), for the
// library's file publication (Core/FileSystem.swift): EINVAL or ENOSYS where the file system or kernel cannot
// do it. glibc (2.28+) declares renameat2 only under _GNU_SOURCE, so it is declared here; calling the libc
// function (not syscall(2)) keeps it visible to LD_PRELOAD fault injection (Tests/FaultInjection).
#include <fcntl.h>
extern int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
static inline int fmdb_rename_noreplace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, 1 /* RENAME_NOREPLACE */);
}

#endif
