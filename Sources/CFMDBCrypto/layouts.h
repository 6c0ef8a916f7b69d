// SQLCipher's crypto-provider struct, `sqlcipher_provider`, as each supported line lays it out, and the
// SQLCipher functions registration calls. A wrong layout is memory corruption: the static asserts pin the
// member counts, and registration picks a layout only for a runtime version checked against its sources.
#ifndef FMDB_CRYPTO_LAYOUTS_H
#define FMDB_CRYPTO_LAYOUTS_H

#include <stdint.h>

// SQLite result codes the callbacks return (sqlite3.h).
#define FMDB_SQLITE_OK 0
#define FMDB_SQLITE_ERROR 1
#define FMDB_SQLITE_NOMEM 7

// SQLCipher's own allocator, so SQLCipher can free the provider struct it is handed. 3.4.1 declares
// `void *sqlcipher_malloc(int)`, 4.6.1 `void *sqlcipher_malloc(sqlite_uint64)`: a size passed as a 64-bit
// integer reaches both correctly (the callee reads the low 32 bits of the same register for an int).
extern void *sqlcipher_malloc(uint64_t size);
// 3.4.1's own signature, to call it exactly as it is defined there.
typedef void *(*sqlcipher_malloc_3_4_1)(int size);
extern int sqlcipher_register_provider(void *provider);

// `sqlcipher_provider` in SQLCipher 3.4.1 (src/sqlcipher.h): 20 members, in this order.
typedef struct {
    int (*activate)(void *ctx);
    int (*deactivate)(void *ctx);
    const char *(*get_provider_name)(void *ctx);
    int (*add_random)(void *ctx, void *buffer, int length);
    int (*random)(void *ctx, void *buffer, int length);
    int (*hmac)(void *ctx, unsigned char *hmac_key, int key_sz, unsigned char *in, int in_sz, unsigned char *in2,
                int in2_sz, unsigned char *out);
    int (*kdf)(void *ctx, const unsigned char *pass, int pass_sz, unsigned char *salt, int salt_sz, int workfactor,
               int key_sz, unsigned char *key);
    int (*cipher)(void *ctx, int mode, unsigned char *key, int key_sz, unsigned char *iv, unsigned char *in, int in_sz,
                  unsigned char *out);
    int (*set_cipher)(void *ctx, const char *cipher_name);
    const char *(*get_cipher)(void *ctx);
    int (*get_key_sz)(void *ctx);
    int (*get_iv_sz)(void *ctx);
    int (*get_block_sz)(void *ctx);
    int (*get_hmac_sz)(void *ctx);
    int (*ctx_copy)(void *target_ctx, void *source_ctx);
    int (*ctx_cmp)(void *c1, void *c2);
    int (*ctx_init)(void **ctx);
    int (*ctx_free)(void **ctx);
    int (*fips_status)(void *ctx);
    const char *(*get_provider_version)(void *ctx);
} provider_3_4_1;

// `sqlcipher_provider` in SQLCipher 4.6.1 (src/sqlcipher.h), and the same in 4.5.1 to 4.6.0: 17 members; no
// set_cipher, ctx_copy or ctx_cmp; hmac, kdf and get_hmac_sz take the algorithm (SQLCIPHER_HMAC_SHA1 0,
// _SHA256 1, _SHA512 2).
typedef struct {
    int (*activate)(void *ctx);
    int (*deactivate)(void *ctx);
    const char *(*get_provider_name)(void *ctx);
    int (*add_random)(void *ctx, void *buffer, int length);
    int (*random)(void *ctx, void *buffer, int length);
    int (*hmac)(void *ctx, int algorithm, unsigned char *hmac_key, int key_sz, unsigned char *in, int in_sz,
                unsigned char *in2, int in2_sz, unsigned char *out);
    int (*kdf)(void *ctx, int algorithm, const unsigned char *pass, int pass_sz, unsigned char *salt, int salt_sz,
               int workfactor, int key_sz, unsigned char *key);
    int (*cipher)(void *ctx, int mode, unsigned char *key, int key_sz, unsigned char *iv, unsigned char *in, int in_sz,
                  unsigned char *out);
    const char *(*get_cipher)(void *ctx);
    int (*get_key_sz)(void *ctx);
    int (*get_iv_sz)(void *ctx);
    int (*get_block_sz)(void *ctx);
    int (*get_hmac_sz)(void *ctx, int algorithm);
    int (*ctx_init)(void **ctx);
    int (*ctx_free)(void **ctx);
    int (*fips_status)(void *ctx);
    const char *(*get_provider_version)(void *ctx);
} provider_4_6_1;

// `sqlcipher_provider` in SQLCipher 4.7.0 and later (src/sqlcipher.h; the same in 4.19.0): 18 members. The
// activate/deactivate pair gave way to an optional process-wide `init`, called once when the provider is
// registered, and `shutdown`, called when SQLCipher shuts down (sqlcipher_extra_shutdown), and SQLCipher
// chains registered providers through `next`, which it sets itself. The other members are 4.6.1's, in
// 4.6.1's order.
typedef struct provider_4_7 provider_4_7;
struct provider_4_7 {
    int (*init)(void);
    void (*shutdown)(void);
    const char *(*get_provider_name)(void *ctx);
    int (*add_random)(void *ctx, void *buffer, int length);
    int (*random)(void *ctx, void *buffer, int length);
    int (*hmac)(void *ctx, int algorithm, unsigned char *hmac_key, int key_sz, unsigned char *in, int in_sz,
                unsigned char *in2, int in2_sz, unsigned char *out);
    int (*kdf)(void *ctx, int algorithm, const unsigned char *pass, int pass_sz, unsigned char *salt, int salt_sz,
               int workfactor, int key_sz, unsigned char *key);
    int (*cipher)(void *ctx, int mode, unsigned char *key, int key_sz, unsigned char *iv, unsigned char *in, int in_sz,
                  unsigned char *out);
    const char *(*get_cipher)(void *ctx);
    int (*get_key_sz)(void *ctx);
    int (*get_iv_sz)(void *ctx);
    int (*get_block_sz)(void *ctx);
    int (*get_hmac_sz)(void *ctx, int algorithm);
    int (*ctx_init)(void **ctx);
    int (*ctx_free)(void **ctx);
    int (*fips_status)(void *ctx);
    const char *(*get_provider_version)(void *ctx);
    provider_4_7 *next;
};

// Every member is a function pointer: the sizes SQLCipher copies (memcpy of sizeof(sqlcipher_provider)) and
// frees (sqlcipher_free) are 20 and 17 pointers; 4.7's are 17 function pointers and one data pointer.
_Static_assert(sizeof(provider_3_4_1) == 20 * sizeof(void (*)(void)), "SQLCipher 3.4.1 layout: 20 members");
_Static_assert(sizeof(provider_4_6_1) == 17 * sizeof(void (*)(void)), "SQLCipher 4.6.1 layout: 17 members");
_Static_assert(sizeof(provider_4_7) == 17 * sizeof(void (*)(void)) + sizeof(void *),
               "SQLCipher 4.7 layout: 18 members");

#endif
