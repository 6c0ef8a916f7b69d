#ifndef FMDB_CRYPTO_CALLBACKS_H
#define FMDB_CRYPTO_CALLBACKS_H

// The provider's callbacks (provider.c), for its registration (registration.c) and its known-answer
// self-test (the CFMDBCryptoSelfTest target, built for the tests only). A private header, not part of
// the module Swift imports. Hidden from the dynamic symbol table; each takes SQLCipher's context pointer
// as SQLCipher passes it (src/sqlcipher.h).

#define HMAC_SHA1 0
#define HMAC_SHA256 1
#define HMAC_SHA512 2

#define FMDB_CRYPTO_INTERNAL __attribute__((visibility("hidden")))

/// Fetches the algorithms once per process; 1 when every one was found.
FMDB_CRYPTO_INTERNAL int fmdb_crypto_prepare(void);

// Both layouts.
FMDB_CRYPTO_INTERNAL int fmdb_crypto_activate(void *ctx);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_deactivate(void *ctx);
FMDB_CRYPTO_INTERNAL const char *fmdb_crypto_provider_name(void *ctx);
FMDB_CRYPTO_INTERNAL const char *fmdb_crypto_provider_version(void *ctx);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_fips_status(void *ctx);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_add_random(void *ctx, void *buffer, int length);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_random_bytes(void *ctx, void *buffer, int length);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_cipher(void *ctx, int mode, unsigned char *key, int key_sz, unsigned char *iv,
                                            unsigned char *in, int in_sz, unsigned char *out);
FMDB_CRYPTO_INTERNAL const char *fmdb_crypto_get_cipher(void *ctx);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_get_key_sz(void *ctx);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_get_iv_sz(void *ctx);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_get_block_sz(void *ctx);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_ctx_init(void **ctx);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_ctx_free(void **ctx);

// SQLCipher 4.6.1's forms: the algorithm (HMAC_SHA1/256/512) is an argument.
FMDB_CRYPTO_INTERNAL int fmdb_crypto_hmac(void *ctx, int algorithm, unsigned char *hmac_key, int key_sz,
                                          unsigned char *in, int in_sz, unsigned char *in2, int in2_sz,
                                          unsigned char *out);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_kdf(void *ctx, int algorithm, const unsigned char *pass, int pass_sz,
                                         unsigned char *salt, int salt_sz, int workfactor, int key_sz,
                                         unsigned char *key);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_hmac_size(void *ctx, int algorithm);

// SQLCipher 3.4.1's forms: HMAC-SHA1 and PBKDF2-HMAC-SHA1 only; PRAGMA cipher; context copies.
FMDB_CRYPTO_INTERNAL int fmdb_crypto_hmac_3(void *ctx, unsigned char *hmac_key, int key_sz, unsigned char *in,
                                            int in_sz, unsigned char *in2, int in2_sz, unsigned char *out);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_kdf_3(void *ctx, const unsigned char *pass, int pass_sz, unsigned char *salt,
                                           int salt_sz, int workfactor, int key_sz, unsigned char *key);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_hmac_size_3(void *ctx);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_set_cipher_3(void *ctx, const char *cipher_name);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_ctx_copy_3(void *target_ctx, void *source_ctx);
FMDB_CRYPTO_INTERNAL int fmdb_crypto_ctx_cmp_3(void *c1, void *c2);

#endif
