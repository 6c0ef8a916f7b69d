#ifndef FMDB_CRYPTO_PROVIDER_H
#define FMDB_CRYPTO_PROVIDER_H

/// FMDBCipher's SQLCipher crypto provider: the computations of SQLCipher's own OpenSSL provider (same
/// cipher, KDF, HMAC input order, no padding), with OpenSSL 3's algorithms fetched once per process and
/// one cipher context and one HMAC context reused per SQLCipher context instead of created, fetched
/// and freed for every page. Files stay byte-compatible with every other SQLCipher client.

/// The name `PRAGMA cipher_provider` reports while this provider is registered.
#define FMDB_CRYPTO_PROVIDER_NAME "fmdbcipher-openssl"

/// The `sqlcipher_provider` layouts this file was written against (verified from SQLCipher's sources:
/// src/sqlcipher.h, src/crypto_impl.c, src/crypto_openssl.c of 3.4.1; src/sqlcipher.h, src/sqlcipher.c,
/// src/crypto_openssl.c of 4.6.1; the same files, as the amalgamation carries them, of 4.19.0 for 4.7's).
typedef enum {
    FMDB_CRYPTO_LAYOUT_SQLCIPHER_3_4_1 = 3,
    FMDB_CRYPTO_LAYOUT_SQLCIPHER_4_6_1 = 4,
    FMDB_CRYPTO_LAYOUT_SQLCIPHER_4_7 = 47,
} fmdb_crypto_layout;

/// Allocates a provider struct of `layout` with `sqlcipher_malloc` (SQLCipher frees it with
/// `sqlcipher_free` when it replaces it) and hands it to `sqlcipher_register_provider`. Call it only
/// while SQLCipher is activated (a keyed connection is open: in 4.6.1 the provider mutex exists only
/// then) and only for a runtime whose version matches `layout` exactly. Returns 0 when registered, -1
/// when OpenSSL could not fetch an algorithm or the layout is unknown (nothing registered then).
int fmdb_crypto_register(int layout);

/// Test hook: how many cipher and HMAC contexts this provider has created in the process. With context
/// reuse they grow with the number of SQLCipher contexts, never with the number of pages.
unsigned long fmdb_crypto_contexts_created(void);

/// Receives each entry of OpenSSL's error queue that a failed call of the provider left, as the provider
/// empties the queue: the provider function that failed and `ERR_error_string_n`'s text (never key bytes).
/// Called on the thread of the failed call, inside SQLCipher's codec: it must not call into SQLite.
typedef void (*fmdb_crypto_error_reporter)(const char *function, const char *text);

/// Sets the reporter of OpenSSL errors (NULL: the queue is emptied unreported). Any thread, any time.
void fmdb_crypto_set_error_reporter(fmdb_crypto_error_reporter reporter);

/// How many failed OpenSSL calls left entries in OpenSSL's error queue (the provider empties the queue
/// after each, reporting every entry, as SQLCipher's own provider does), and the first entry of the last
/// one (`ERR_get_error`'s packed code; 0 when none): for diagnosis.
unsigned long fmdb_crypto_openssl_failures(void);
unsigned long fmdb_crypto_last_openssl_error(void);

#endif
