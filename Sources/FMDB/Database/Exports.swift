// `import FMDB` gives SQLCipher's C API (SQLITE_* constants, sqlite3_* functions), as `import SQLite3`
// does on Apple platforms, so FMDB code that calls the C API directly compiles unchanged.
@_exported import CSQLCipher
