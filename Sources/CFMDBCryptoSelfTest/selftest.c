// The provider's known-answer self-test (include/CFMDBCryptoSelfTest.h): a target of its own, so the
// shipped library does not carry it.
#include "CFMDBCryptoSelfTest.h"
#include "callbacks.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <string.h>

#include "CFMDBCrypto.h"

#define FMDB_SQLITE_OK 0

// One-shot references, with fresh OpenSSL contexts: what SQLCipher's own provider computes.
static int reference_cipher(int mode, const unsigned char *key, const unsigned char *iv, const unsigned char *in,
                            int in_sz, unsigned char *out) {
    EVP_CIPHER *aes = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL);
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int first = 0, last = 0, ok;
    if (c == NULL || aes == NULL) {
        EVP_CIPHER_CTX_free(c);
        EVP_CIPHER_free(aes);
        return 0;
    }
    ok = EVP_CipherInit_ex2(c, aes, key, iv, mode, NULL) && EVP_CIPHER_CTX_set_padding(c, 0)
        && EVP_CipherUpdate(c, out, &first, in, in_sz) && EVP_CipherFinal_ex(c, out + first, &last)
        && first + last == in_sz;
    EVP_CIPHER_CTX_free(c);
    EVP_CIPHER_free(aes);
    return ok;
}

static int reference_hmac(int algorithm, const unsigned char *key, int key_sz, const unsigned char *in, int in_sz,
                          const unsigned char *in2, int in2_sz, unsigned char *out) {
    static const char *const digest_names[3] = {"SHA1", "SHA256", "SHA512"};
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *m = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
    OSSL_PARAM params[2];
    size_t written = 0;
    int ok;
    if (m == NULL) {
        EVP_MAC_free(mac);
        return 0;
    }
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)digest_names[algorithm], 0);
    params[1] = OSSL_PARAM_construct_end();
    ok = EVP_MAC_init(m, key, (size_t)key_sz, params) && EVP_MAC_update(m, in, (size_t)in_sz)
        && EVP_MAC_update(m, in2, (size_t)in2_sz) && EVP_MAC_final(m, out, &written, 64);
    EVP_MAC_CTX_free(m);
    EVP_MAC_free(mac);
    return ok;
}

int fmdb_crypto_selftest(void) {
    // Keys change in place in one buffer, as SQLCipher changes them (a rekey derives into the same
    // buffer): A, B, A again, in both directions and for the HMAC, with digest switches and failed calls.
    static const unsigned char pattern_a = 0x5A, pattern_b = 0xA5;
    unsigned char key[32], iv[16], page[1024], pgno[4] = {1, 0, 0, 0};
    unsigned char got[1024], want[1024], mac_got[64], mac_want[64];
    const unsigned char patterns[4] = {pattern_a, pattern_b, pattern_a, pattern_a};
    const int algorithms[4] = {HMAC_SHA1, HMAC_SHA512, HMAC_SHA512, HMAC_SHA1};
    void *ctx = NULL;
    int step = 0, failed = 0;
    if (!fmdb_crypto_prepare() || fmdb_crypto_ctx_init(&ctx) != FMDB_SQLITE_OK) return -1;
    for (size_t i = 0; i < sizeof page; i++) page[i] = (unsigned char)(i * 7);
    // Each round uses each direction and the HMAC twice: the first call after a key change sets the key up,
    // the second (another IV, another page number) takes the kept key schedule or HMAC pads.
    for (int round = 0; round < 4 && !failed; round++) {
        memset(key, patterns[round], sizeof key);
        key[31] = (unsigned char)round; // round 3's key differs from round 2's (round 0's) in one byte only
        if (round == 2) key[31] = 0;    // round 2: exactly round 0's key again, after B
        for (int mode = 1; mode >= 0 && !failed; mode--) {
            for (int repeat = 0; repeat < 2 && !failed; repeat++) {
                memset(iv, round * 16 + mode * 4 + repeat, sizeof iv);
                step++;
                if (fmdb_crypto_cipher(ctx, mode, key, 32, iv, page, (int)sizeof page, got) != FMDB_SQLITE_OK
                    || !reference_cipher(mode, key, iv, page, (int)sizeof page, want)
                    || memcmp(got, want, sizeof got) != 0)
                    failed = step;
            }
        }
        for (int repeat = 0; repeat < 2 && !failed; repeat++) {
            pgno[0] = (unsigned char)(round * 2 + repeat + 1);
            step++;
            if (fmdb_crypto_hmac(ctx, algorithms[round], key, 32, page, (int)sizeof page, pgno, 4, mac_got)
                    != FMDB_SQLITE_OK
                || !reference_hmac(algorithms[round], key, 32, page, (int)sizeof page, pgno, 4, mac_want)
                || memcmp(mac_got, mac_want, (size_t)fmdb_crypto_hmac_size(ctx, algorithms[round])) != 0)
                failed = step;
        }
    }
    // A failed encryption spoils the MAC right after it; the MAC after that is right again.
    step++;
    if (!failed) {
        memset(key, pattern_b, sizeof key);
        if (fmdb_crypto_cipher(ctx, 7, key, 32, iv, page, (int)sizeof page, got) == FMDB_SQLITE_OK) failed = step;
    }
    step++;
    if (!failed && (fmdb_crypto_hmac(ctx, HMAC_SHA1, key, 32, page, (int)sizeof page, pgno, 4, mac_got)
                        == FMDB_SQLITE_OK
                    || !reference_hmac(HMAC_SHA1, key, 32, page, (int)sizeof page, pgno, 4, mac_want)
                    || memcmp(mac_got, mac_want, 20) == 0))
        failed = step;
    step++;
    if (!failed && (fmdb_crypto_hmac(ctx, HMAC_SHA1, key, 32, page, (int)sizeof page, pgno, 4, mac_got)
                        != FMDB_SQLITE_OK
                    || memcmp(mac_got, mac_want, 20) != 0))
        failed = step;
    // A failure leaves OpenSSL's error queue empty (here: an entry put there before a call that fails).
    step++;
    if (!failed) {
        unsigned long before = fmdb_crypto_openssl_failures();
        ERR_raise(ERR_LIB_EVP, ERR_R_PASSED_INVALID_ARGUMENT);
        if (fmdb_crypto_cipher(ctx, 1, key, 32, iv, page, -1, got) == FMDB_SQLITE_OK || ERR_peek_error() != 0
            || fmdb_crypto_openssl_failures() != before + 1 || fmdb_crypto_last_openssl_error() == 0)
            failed = step;
        ERR_clear_error();
    }
    fmdb_crypto_ctx_free(&ctx);
    OPENSSL_cleanse(key, sizeof key);
    return failed;
}

int fmdb_crypto_selftest_failing_call(void) {
    unsigned char key[32] = {0}, iv[16] = {0}, page[64] = {0}, out[64];
    void *ctx = NULL;
    int rc;
    if (!fmdb_crypto_prepare() || fmdb_crypto_ctx_init(&ctx) != FMDB_SQLITE_OK) return -1;
    ERR_raise(ERR_LIB_EVP, ERR_R_PASSED_INVALID_ARGUMENT);
    rc = fmdb_crypto_cipher(ctx, 1, key, 32, iv, page, -1, out);
    fmdb_crypto_ctx_free(&ctx);
    return rc;
}
