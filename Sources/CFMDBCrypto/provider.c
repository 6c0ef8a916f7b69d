// FMDBCipher's SQLCipher crypto provider (see include/CFMDBCrypto.h).
//
// SQLCipher's OpenSSL provider (3.4.1 and 4.6.1, src/crypto_openssl.c) creates and frees an HMAC context
// and a cipher context for every page, and with OpenSSL 3 each of those implicitly fetches its algorithm
// from the provider store (name lookups, locks, allocations). This provider computes exactly the same
// bytes: AES-256-CBC (3.4.1: the cipher `PRAGMA cipher` names) without padding over `in_sz` bytes with the
// page's IV; HMAC over `in` then `in2` (the page number) with SHA-1 (3.4.1) or the algorithm SQLCipher 4
// passes; PBKDF2-HMAC with the same digest. What differs is only where the work is set up: algorithms are
// fetched once per process, and each SQLCipher context owns one reusable EVP_CIPHER_CTX and one
// EVP_MAC_CTX (created on first use, never shared between SQLCipher contexts, freed in ctx_free).
// Keys: SQLCipher passes the page key and HMAC key with every call. Setting them up is not free next to a
// page (callgrind, 3.4.1, 1 KiB pages: the HMAC key pads ~4,300 instructions, AES key expansion ~2,000,
// against ~13,700 for SHA-1 over the page itself), so each context remembers the last key it set up, per
// direction for the cipher (an encryption and a decryption key schedule differ), and sets it up again
// only when the key passed differs (CRYPTO_memcmp) or the algorithm changed. A changed key is therefore
// never missed. The remembered copies live in this context beside OpenSSL's contexts, which hold
// key-equivalent state anyway (key schedules, HMAC pad states); they are wiped with OPENSSL_cleanse when a
// key is replaced, after a failure and when the context is freed. EVP_CIPHER_CTX_free and
// EVP_MAC_CTX_free wipe the state they hold (OpenSSL 3: the AES provider context is freed with
// OPENSSL_clear_free, the HMAC context's key with OPENSSL_secure_clear_free and its digest contexts with
// EVP_MD_CTX_free, which cleanses the state).
#include "CFMDBCrypto.h"
#include "callbacks.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// SQLite result codes the callbacks return (sqlite3.h).
#define FMDB_SQLITE_OK 0
#define FMDB_SQLITE_ERROR 1
#define FMDB_SQLITE_NOMEM 7

// Fetched once per process (pthread_once); never freed, as the provider stays registered for the process.
static pthread_once_t fetch_once = PTHREAD_ONCE_INIT;
static int fetched = 0;
static EVP_MAC *hmac_mac = NULL;
static EVP_CIPHER *aes_256_cbc = NULL;
static EVP_MD *digests[3] = {NULL, NULL, NULL};
static const char *const digest_names[3] = {"SHA1", "SHA256", "SHA512"};
static atomic_ulong contexts_created = 0;

static void fetch_algorithms(void);

int fmdb_crypto_prepare(void) {
    pthread_once(&fetch_once, fetch_algorithms);
    return fetched;
}

unsigned long fmdb_crypto_contexts_created(void) { return atomic_load(&contexts_created); }

// OpenSSL's error queue after a failed call. SQLCipher's own provider empties it and logs each entry at
// error level (4.x: sqlcipher_openssl_log_errors); so does this one, through the reporter the library sets
// (its logger): one line per entry, ERR_error_string_n's text (library, reason: never key bytes, and never
// the free-form data an entry may carry). A queue left full is per thread and would be read as the cause
// of the next, unrelated failure by any OpenSSL user on the thread. The first entry of the last failure,
// and how many failures left entries, are kept for diagnosis.
static atomic_ulong openssl_failures = 0;
static atomic_ulong last_openssl_error = 0;
static _Atomic(fmdb_crypto_error_reporter) error_reporter = NULL;

void fmdb_crypto_set_error_reporter(fmdb_crypto_error_reporter reporter) { atomic_store(&error_reporter, reporter); }

// The queue is emptied first (its first 16 entries kept), then reported: a reporter (a program's log
// handler) that leaves OpenSSL errors of its own on this thread cannot keep the loop going.
static void drain_openssl_errors(const char *function) {
    unsigned long first = ERR_peek_error(), codes[16], code;
    size_t count = 0;
    fmdb_crypto_error_reporter reporter = atomic_load(&error_reporter);
    char text[256];
    if (first == 0) return;
    while ((code = ERR_get_error()) != 0) {
        if (count < sizeof codes / sizeof codes[0]) codes[count++] = code;
    }
    atomic_store(&last_openssl_error, first);
    atomic_fetch_add(&openssl_failures, 1);
    if (reporter == NULL) return;
    for (size_t i = 0; i < count; i++) {
        ERR_error_string_n(codes[i], text, sizeof text);
        reporter(function, text);
    }
}

unsigned long fmdb_crypto_openssl_failures(void) { return atomic_load(&openssl_failures); }
unsigned long fmdb_crypto_last_openssl_error(void) { return atomic_load(&last_openssl_error); }

static void fetch_algorithms(void) {
    hmac_mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    aes_256_cbc = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL);
    for (int i = 0; i < 3; i++) digests[i] = EVP_MD_fetch(NULL, digest_names[i], NULL);
    fetched = hmac_mac != NULL && aes_256_cbc != NULL && digests[0] != NULL && digests[1] != NULL && digests[2] != NULL;
}

// The longest key either cache keeps (SQLCipher's keys are 32 bytes; PRAGMA cipher allows up to 64).
#define KEY_CACHE_MAX 64

// A cipher context for one direction (SQLCipher's CIPHER_DECRYPT 0, CIPHER_ENCRYPT 1) and the key it is
// set up with.
typedef struct {
    EVP_CIPHER_CTX *ctx;          // reused for every page; created on first use
    EVP_CIPHER *cipher;           // the cipher ctx is set up for (NULL: set it up again)
    int keeps_key;                // iv_restarts_cipher(cipher): a kept key schedule may serve the next page
    unsigned char key[KEY_CACHE_MAX]; // the key ctx's schedule was made from (key_sz 0: none)
    int key_sz;
} direction_ctx;

// One per SQLCipher context (3.4.1: per cipher context, read and write each; 4.6.1: per codec context,
// shared by its read and write cipher contexts, so the key passed may alternate, as during a rekey).
typedef struct {
    EVP_CIPHER *cipher;           // owned reference: AES-256-CBC, or what 3.4.1's PRAGMA cipher chose
    direction_ctx direction[2];   // [0] decryption, [1] encryption
    EVP_MAC_CTX *mac_ctx;         // reused for every page; created on first use
    int mac_algorithm;            // the digest mac_ctx is set to (-1: none yet)
    unsigned char mac_key[KEY_CACHE_MAX]; // the key mac_ctx's pads were made from (mac_key_sz 0: none)
    int mac_key_sz;
    int cipher_failed;            // the last cipher() failed: the next MAC on this context must not verify
} provider_ctx;

// Remembers `key` as the one a context is set up with, or nothing when it is too long to keep (it is
// then set up again at every call).
static void remember_key(unsigned char *slot, int *slot_sz, const unsigned char *key, int key_sz) {
    OPENSSL_cleanse(slot, KEY_CACHE_MAX);
    *slot_sz = 0;
    if (key_sz > 0 && key_sz <= KEY_CACHE_MAX) {
        memcpy(slot, key, (size_t)key_sz);
        *slot_sz = key_sz;
    }
}

static void forget_key(unsigned char *slot, int *slot_sz) {
    OPENSSL_cleanse(slot, KEY_CACHE_MAX);
    *slot_sz = 0;
}

// 1 when setting a new IV restarts `cipher` completely, so a kept key schedule gives the same bytes as a
// fresh set-up: the block modes whose only state between pages is the IV (OpenSSL's generic init resets
// the IV and the buffered bytes). Other modes, stream ciphers with no IV (RC4) among them, keep state a new
// IV does not reset, so their key is set up at every call.
static int iv_restarts_cipher(const EVP_CIPHER *cipher) {
    switch (EVP_CIPHER_get_mode(cipher)) {
    case EVP_CIPH_ECB_MODE:
        return 1;
    case EVP_CIPH_CBC_MODE:
    case EVP_CIPH_CFB_MODE:
    case EVP_CIPH_OFB_MODE:
    case EVP_CIPH_CTR_MODE:
        return EVP_CIPHER_get_iv_length(cipher) > 0;
    default:
        return 0;
    }
}

// After the context's cipher changed: each direction sets its cipher and key up again at its next call.
static void reset_directions(provider_ctx *p) {
    for (int mode = 0; mode < 2; mode++) {
        p->direction[mode].cipher = NULL;
        forget_key(p->direction[mode].key, &p->direction[mode].key_sz);
    }
}

// 1 when `key` is the key a context is set up with (constant time in the key's bytes).
static int same_key(const unsigned char *slot, int slot_sz, const unsigned char *key, int key_sz) {
    return slot_sz > 0 && slot_sz == key_sz && CRYPTO_memcmp(slot, key, (size_t)key_sz) == 0;
}

// Output that must never verify or decrypt to anything: SQLCipher 3.4.1 ignores the results of hmac(),
// cipher() and kdf(), so a failure has to show in the bytes. Random (a zero MAC would match a tampered
// page whose stored MAC is zeros); if even RAND_bytes fails, a fixed non-zero pattern.
static void fill_unusable(unsigned char *out, size_t size) {
    if (out == NULL || size == 0) return;
    if (size > INT32_MAX || RAND_bytes(out, (int)size) != 1) memset(out, 0xA5, size);
}

const char *fmdb_crypto_provider_name(void *ctx) {
    (void)ctx; // 3.4.1 passes its cipher context here, not ours: never dereferenced
    return FMDB_CRYPTO_PROVIDER_NAME;
}

const char *fmdb_crypto_provider_version(void *ctx) {
    (void)ctx;
    return OpenSSL_version(OPENSSL_VERSION);
}

int fmdb_crypto_fips_status(void *ctx) {
    (void)ctx;
    return EVP_default_properties_is_fips_enabled(NULL);
}

// SQLCipher calls these when its first keyed connection opens and its last one closes. Nothing to do:
// the algorithms are fetched once (fmdb_crypto_prepare) and kept for the process.
int fmdb_crypto_activate(void *ctx) {
    (void)ctx;
    return FMDB_SQLITE_OK;
}

int fmdb_crypto_deactivate(void *ctx) {
    (void)ctx;
    return FMDB_SQLITE_OK;
}

int fmdb_crypto_add_random(void *ctx, void *buffer, int length) {
    (void)ctx;
    if (buffer == NULL || length < 0) return FMDB_SQLITE_ERROR;
    RAND_add(buffer, length, 0);
    return FMDB_SQLITE_OK;
}

int fmdb_crypto_random_bytes(void *ctx, void *buffer, int length) {
    (void)ctx;
    if (buffer == NULL || length < 0) return FMDB_SQLITE_ERROR;
    return RAND_bytes((unsigned char *)buffer, length) == 1 ? FMDB_SQLITE_OK : FMDB_SQLITE_ERROR;
}

static const EVP_CIPHER *context_cipher(void *ctx) {
    provider_ctx *p = ctx;
    return p != NULL && p->cipher != NULL ? p->cipher : aes_256_cbc;
}

int fmdb_crypto_cipher(void *ctx, int mode, unsigned char *key, int key_sz, unsigned char *iv, unsigned char *in,
                       int in_sz, unsigned char *out) {
    provider_ctx *p = ctx;
    direction_ctx *d;
    int first = 0, last = 0, cipher_key_sz;
    int rc = FMDB_SQLITE_ERROR;
    (void)key_sz; // as SQLCipher's provider: the cipher reads its own key length from `key`
    if (p == NULL) {
        if (out != NULL && in_sz > 0) fill_unusable(out, (size_t)in_sz);
        return FMDB_SQLITE_ERROR;
    }
    if (p->cipher == NULL || key == NULL || in == NULL || out == NULL || in_sz < 0) goto error;
    if (mode != 0 && mode != 1) goto error; // SQLCipher's CIPHER_DECRYPT and CIPHER_ENCRYPT
    d = &p->direction[mode];
    if (d->ctx == NULL) {
        d->ctx = EVP_CIPHER_CTX_new();
        if (d->ctx == NULL) {
            rc = FMDB_SQLITE_NOMEM;
            goto error;
        }
        atomic_fetch_add(&contexts_created, 1);
    }
    if (d->cipher != p->cipher) {
        forget_key(d->key, &d->key_sz);
        if (!EVP_CipherInit_ex2(d->ctx, p->cipher, NULL, NULL, mode, NULL)) goto error;
        if (!EVP_CIPHER_CTX_set_padding(d->ctx, 0)) goto error; // SQLCipher pages are whole blocks
        d->cipher = p->cipher;
        d->keeps_key = iv_restarts_cipher(p->cipher);
    }
    cipher_key_sz = EVP_CIPHER_get_key_length(p->cipher);
    if (d->keeps_key && same_key(d->key, d->key_sz, key, cipher_key_sz)) {
        // The same cipher, direction and key: only the IV changes; the key schedule is kept.
        if (!EVP_CipherInit_ex2(d->ctx, NULL, NULL, iv, mode, NULL)) goto error;
    } else {
        if (!EVP_CipherInit_ex2(d->ctx, NULL, key, iv, mode, NULL)) goto error;
        remember_key(d->key, &d->key_sz, key, cipher_key_sz);
    }
    if (!EVP_CipherUpdate(d->ctx, out, &first, in, in_sz)) goto error;
    if (!EVP_CipherFinal_ex(d->ctx, out + first, &last)) goto error;
    if (first + last != in_sz) goto error;
    return FMDB_SQLITE_OK;
error:
    drain_openssl_errors(__func__);
    // 3.4.1 ignores this result: leave no partial output behind (or the plaintext a shared buffer held),
    // set the context up afresh next time, and make the MAC that follows on this context (3.4.1 MACs the
    // output right after) fail, so a page that did not encrypt can never be read back as valid.
    if (out != NULL && in_sz > 0) fill_unusable(out, (size_t)in_sz);
    if (mode == 0 || mode == 1) {
        p->direction[mode].cipher = NULL;
        forget_key(p->direction[mode].key, &p->direction[mode].key_sz);
    }
    p->cipher_failed = 1;
    return rc;
}

int fmdb_crypto_hmac(void *ctx, int algorithm, unsigned char *hmac_key, int key_sz, unsigned char *in, int in_sz,
                unsigned char *in2, int in2_sz, unsigned char *out) {
    provider_ctx *p = ctx;
    OSSL_PARAM params[2];
    OSSL_PARAM *digest = NULL;
    size_t mac_size = 0, written = 0;
    if (out == NULL || algorithm < HMAC_SHA1 || algorithm > HMAC_SHA512) return FMDB_SQLITE_ERROR;
    mac_size = (size_t)EVP_MD_get_size(digests[algorithm]);
    if (p == NULL || hmac_key == NULL || key_sz < 0 || in == NULL || in_sz < 0 || in2_sz < 0) goto error;
    if (p->mac_ctx == NULL) {
        p->mac_ctx = EVP_MAC_CTX_new(hmac_mac);
        if (p->mac_ctx == NULL) {
            fill_unusable(out, mac_size);
            return FMDB_SQLITE_NOMEM;
        }
        atomic_fetch_add(&contexts_created, 1);
        p->mac_algorithm = -1;
    }
    if (p->cipher_failed) {
        p->cipher_failed = 0;
        goto error;
    }
    if (p->mac_algorithm == algorithm && same_key(p->mac_key, p->mac_key_sz, hmac_key, key_sz)) {
        // The same digest and key: start from the pads computed when the key was set (OpenSSL 3: a NULL
        // key re-initialises the HMAC from its saved inner state).
        if (!EVP_MAC_init(p->mac_ctx, NULL, 0, NULL)) goto error;
    } else {
        if (p->mac_algorithm != algorithm) {
            params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)digest_names[algorithm], 0);
            params[1] = OSSL_PARAM_construct_end();
            digest = params;
        }
        forget_key(p->mac_key, &p->mac_key_sz);
        if (!EVP_MAC_init(p->mac_ctx, hmac_key, (size_t)key_sz, digest)) goto error;
        p->mac_algorithm = algorithm;
        remember_key(p->mac_key, &p->mac_key_sz, hmac_key, key_sz);
    }
    if (!EVP_MAC_update(p->mac_ctx, in, (size_t)in_sz)) goto error;
    if (in2 != NULL && !EVP_MAC_update(p->mac_ctx, in2, (size_t)in2_sz)) goto error;
    if (EVP_MAC_CTX_get_mac_size(p->mac_ctx) != mac_size || !EVP_MAC_final(p->mac_ctx, out, &written, mac_size)
        || written != mac_size)
        goto error;
    return FMDB_SQLITE_OK;
error:
    drain_openssl_errors(__func__);
    // 3.4.1 ignores this result: a random MAC fails the page's check instead of matching by accident.
    fill_unusable(out, mac_size);
    if (p != NULL) {
        p->mac_algorithm = -1;
        forget_key(p->mac_key, &p->mac_key_sz);
    }
    return FMDB_SQLITE_ERROR;
}

int fmdb_crypto_kdf(void *ctx, int algorithm, const unsigned char *pass, int pass_sz, unsigned char *salt, int salt_sz,
               int workfactor, int key_sz, unsigned char *key) {
    (void)ctx;
    if (key == NULL || key_sz < 0) return FMDB_SQLITE_ERROR;
    // 3.4.1 ignores this result: a key that failed to derive must not be a known one (zeros, or the old
    // key during a rekey), or pages would be written under it.
    if (algorithm < HMAC_SHA1 || algorithm > HMAC_SHA512 || pass_sz < 0 || salt_sz < 0
        || !PKCS5_PBKDF2_HMAC((const char *)pass, pass_sz, salt, salt_sz, workfactor, digests[algorithm], key_sz,
                              key)) {
        drain_openssl_errors(__func__);
        fill_unusable(key, (size_t)key_sz);
        return FMDB_SQLITE_ERROR;
    }
    return FMDB_SQLITE_OK;
}

const char *fmdb_crypto_get_cipher(void *ctx) {
    const EVP_CIPHER *c = context_cipher(ctx);
    // SQLCipher's providers answer with the short name of the cipher's NID ("AES-256-CBC").
    const char *name = OBJ_nid2sn(EVP_CIPHER_get_nid(c));
    return name != NULL ? name : EVP_CIPHER_get0_name(c);
}

int fmdb_crypto_get_key_sz(void *ctx) { return EVP_CIPHER_get_key_length(context_cipher(ctx)); }
int fmdb_crypto_get_iv_sz(void *ctx) { return EVP_CIPHER_get_iv_length(context_cipher(ctx)); }
int fmdb_crypto_get_block_sz(void *ctx) { return EVP_CIPHER_get_block_size(context_cipher(ctx)); }

int fmdb_crypto_hmac_size(void *ctx, int algorithm) {
    (void)ctx;
    if (algorithm < HMAC_SHA1 || algorithm > HMAC_SHA512) return 0;
    return EVP_MD_get_size(digests[algorithm]);
}

int fmdb_crypto_ctx_init(void **ctx) {
    provider_ctx *p;
    if (ctx == NULL) return FMDB_SQLITE_ERROR;
    p = calloc(1, sizeof(provider_ctx));
    if (p == NULL) return FMDB_SQLITE_NOMEM;
    if (!EVP_CIPHER_up_ref(aes_256_cbc)) {
        drain_openssl_errors(__func__);
        free(p);
        return FMDB_SQLITE_ERROR;
    }
    p->cipher = aes_256_cbc;
    p->mac_algorithm = -1;
    *ctx = p;
    return FMDB_SQLITE_OK;
}

int fmdb_crypto_ctx_free(void **ctx) {
    provider_ctx *p;
    if (ctx == NULL || *ctx == NULL) return FMDB_SQLITE_OK;
    p = *ctx;
    for (int mode = 0; mode < 2; mode++) EVP_CIPHER_CTX_free(p->direction[mode].ctx); // wipe the key schedules
    EVP_MAC_CTX_free(p->mac_ctx);       // wipes the last HMAC key and pads
    EVP_CIPHER_free(p->cipher);
    OPENSSL_cleanse(p, sizeof(*p));     // the remembered keys
    free(p);
    *ctx = NULL;
    return FMDB_SQLITE_OK;
}

// MARK: - SQLCipher 3.4.1 only

int fmdb_crypto_hmac_3(void *ctx, unsigned char *hmac_key, int key_sz, unsigned char *in, int in_sz, unsigned char *in2,
                  int in2_sz, unsigned char *out) {
    return fmdb_crypto_hmac(ctx, HMAC_SHA1, hmac_key, key_sz, in, in_sz, in2, in2_sz, out); // 3.4.1: always HMAC-SHA1
}

int fmdb_crypto_kdf_3(void *ctx, const unsigned char *pass, int pass_sz, unsigned char *salt, int salt_sz,
                      int workfactor, int key_sz, unsigned char *key) {
    return fmdb_crypto_kdf(ctx, HMAC_SHA1, pass, pass_sz, salt, salt_sz, workfactor, key_sz, key); // PBKDF2-HMAC-SHA1
}

int fmdb_crypto_hmac_size_3(void *ctx) { return fmdb_crypto_hmac_size(ctx, HMAC_SHA1); }

// PRAGMA cipher = NAME. SQLCipher's provider takes whatever EVP_get_cipherbyname knows; this one resolves
// the name (and its aliases) the same way, then fetches the implementation once, so an unknown name, or
// one only OpenSSL's legacy provider implements, fails here with SQLITE_ERROR instead of at the first page.
// Only what a SQLCipher page can hold: an unauthenticated block or stream mode (no AEAD, key wrap, SIV,
// OCB, CCM or GCM: their tags have nowhere to go, so every page would fail to decrypt), a key of at most
// 64 bytes and an IV of at most 16 (SQLCipher's key buffers and reserved IV space).
int fmdb_crypto_set_cipher_3(void *ctx, const char *cipher_name) {
    provider_ctx *p = ctx;
    const EVP_CIPHER *legacy;
    const char *name;
    EVP_CIPHER *found = NULL;
    int mode;
    if (p == NULL || cipher_name == NULL) return FMDB_SQLITE_ERROR;
    legacy = EVP_get_cipherbyname(cipher_name);
    if (legacy == NULL) {
        drain_openssl_errors(__func__);
        return FMDB_SQLITE_ERROR;
    }
    name = OBJ_nid2sn(EVP_CIPHER_get_nid(legacy));
    if (name != NULL) found = EVP_CIPHER_fetch(NULL, name, NULL);
    if (found == NULL) {
        drain_openssl_errors(__func__);
        return FMDB_SQLITE_ERROR;
    }
    mode = EVP_CIPHER_get_mode(found);
    if ((EVP_CIPHER_get_flags(found) & EVP_CIPH_FLAG_AEAD_CIPHER) != 0 || mode == EVP_CIPH_GCM_MODE
        || mode == EVP_CIPH_CCM_MODE || mode == EVP_CIPH_OCB_MODE || mode == EVP_CIPH_SIV_MODE
        || mode == EVP_CIPH_WRAP_MODE || EVP_CIPHER_get_key_length(found) > 64
        || EVP_CIPHER_get_iv_length(found) > 16) {
        EVP_CIPHER_free(found);
        return FMDB_SQLITE_ERROR;
    }
    EVP_CIPHER_free(p->cipher);
    p->cipher = found;
    reset_directions(p);
    return FMDB_SQLITE_OK;
}

// A deep copy: the target keeps its own cipher and HMAC contexts and takes a reference to the source's
// cipher choice; nothing is shared but the (immutable, reference-counted) algorithm.
// SQLCipher copies a context when its key changes (3.4.1: sqlcipher_codec_key_copy at a rekey's commit), so
// the target also drops every key it held: its key schedules (EVP_CIPHER_CTX_reset clears them), its HMAC
// context and its remembered keys. Nothing of an old key stays until the next page.
int fmdb_crypto_ctx_copy_3(void *target_ctx, void *source_ctx) {
    provider_ctx *target = target_ctx, *source = source_ctx;
    if (target == NULL || source == NULL || source->cipher == NULL) return FMDB_SQLITE_ERROR;
    if (target->cipher != source->cipher) {
        if (!EVP_CIPHER_up_ref(source->cipher)) return FMDB_SQLITE_ERROR;
        EVP_CIPHER_free(target->cipher);
        target->cipher = source->cipher;
    }
    for (int mode = 0; mode < 2; mode++) {
        if (target->direction[mode].ctx != NULL) EVP_CIPHER_CTX_reset(target->direction[mode].ctx);
    }
    reset_directions(target);
    EVP_MAC_CTX_free(target->mac_ctx);
    target->mac_ctx = NULL;
    target->mac_algorithm = -1;
    forget_key(target->mac_key, &target->mac_key_sz);
    return FMDB_SQLITE_OK;
}

// 1 when both contexts use the same cipher (SQLCipher's provider compares its EVP_CIPHER pointers).
int fmdb_crypto_ctx_cmp_3(void *c1, void *c2) {
    return EVP_CIPHER_get_nid(context_cipher(c1)) == EVP_CIPHER_get_nid(context_cipher(c2));
}
