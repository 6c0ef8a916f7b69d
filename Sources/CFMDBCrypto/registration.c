// Registration of the provider with SQLCipher: the callbacks (provider.c) filled into the struct layout of
// the linked line (layouts.h), allocated with SQLCipher's allocator so SQLCipher can free it.
#include "CFMDBCrypto.h"
#include "callbacks.h"
#include "layouts.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

// The members every layout shares, with the same signatures (the struct types differ in order and in the
// others, so each layout names its members; this fills the common ones by name).
#define FILL_COMMON_MEMBERS(p)                                                                                 \
    do {                                                                                                       \
        (p)->get_provider_name = fmdb_crypto_provider_name;                                                    \
        (p)->add_random = fmdb_crypto_add_random;                                                              \
        (p)->random = fmdb_crypto_random_bytes;                                                                \
        (p)->cipher = fmdb_crypto_cipher;                                                                      \
        (p)->get_cipher = fmdb_crypto_get_cipher;                                                              \
        (p)->get_key_sz = fmdb_crypto_get_key_sz;                                                              \
        (p)->get_iv_sz = fmdb_crypto_get_iv_sz;                                                                \
        (p)->get_block_sz = fmdb_crypto_get_block_sz;                                                          \
        (p)->ctx_init = fmdb_crypto_ctx_init;                                                                  \
        (p)->ctx_free = fmdb_crypto_ctx_free;                                                                  \
        (p)->fips_status = fmdb_crypto_fips_status;                                                            \
        (p)->get_provider_version = fmdb_crypto_provider_version;                                              \
    } while (0)

int fmdb_crypto_register(int layout) {
    if (!fmdb_crypto_prepare()) return -1;
    switch (layout) {
    case FMDB_CRYPTO_LAYOUT_SQLCIPHER_3_4_1: {
        provider_3_4_1 *p = ((sqlcipher_malloc_3_4_1)sqlcipher_malloc)((int)sizeof(provider_3_4_1));
        if (p == NULL) return -1;
        FILL_COMMON_MEMBERS(p);
        p->activate = fmdb_crypto_activate;
        p->deactivate = fmdb_crypto_deactivate;
        p->hmac = fmdb_crypto_hmac_3;
        p->kdf = fmdb_crypto_kdf_3;
        p->set_cipher = fmdb_crypto_set_cipher_3;
        p->get_hmac_sz = fmdb_crypto_hmac_size_3;
        p->ctx_copy = fmdb_crypto_ctx_copy_3;
        p->ctx_cmp = fmdb_crypto_ctx_cmp_3;
        return sqlcipher_register_provider(p) == FMDB_SQLITE_OK ? 0 : -1;
    }
    case FMDB_CRYPTO_LAYOUT_SQLCIPHER_4_6_1: {
        provider_4_6_1 *p = sqlcipher_malloc(sizeof(provider_4_6_1));
        if (p == NULL) return -1;
        FILL_COMMON_MEMBERS(p);
        p->activate = fmdb_crypto_activate;
        p->deactivate = fmdb_crypto_deactivate;
        p->hmac = fmdb_crypto_hmac;
        p->kdf = fmdb_crypto_kdf;
        p->get_hmac_sz = fmdb_crypto_hmac_size;
        return sqlcipher_register_provider(p) == FMDB_SQLITE_OK ? 0 : -1;
    }
    case FMDB_CRYPTO_LAYOUT_SQLCIPHER_4_7: {
        // Zeroed: no init or shutdown (the algorithms are fetched above and kept for the process), and
        // `next` is SQLCipher's to set. SQLCipher keeps every registered provider in its list until it
        // shuts down, then frees each with sqlcipher_free.
        provider_4_7 *p = sqlcipher_malloc(sizeof(provider_4_7));
        if (p == NULL) return -1;
        memset(p, 0, sizeof(*p));
        FILL_COMMON_MEMBERS(p);
        p->hmac = fmdb_crypto_hmac;
        p->kdf = fmdb_crypto_kdf;
        p->get_hmac_sz = fmdb_crypto_hmac_size;
        return sqlcipher_register_provider(p) == FMDB_SQLITE_OK ? 0 : -1;
    }
    default:
        return -1;
    }
}
