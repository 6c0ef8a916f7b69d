#ifndef FMDB_CRYPTO_SELFTEST_H
#define FMDB_CRYPTO_SELFTEST_H

/// A known-answer test of one provider context, built for the tests only (never linked into the library).
/// It changes the key in place in one buffer (key A, key B, A again), encrypts and decrypts a page in both
/// directions and MACs it with the digests switching, checks that a failed encryption spoils the next MAC
/// and the one after is right again, and that a failure leaves OpenSSL's error queue empty. Every output is
/// compared with a one-shot OpenSSL computation (fresh contexts, as SQLCipher's provider does). Returns 0
/// when everything matched, the number of the first step that did not, or -1 when OpenSSL could not be set up.
int fmdb_crypto_selftest(void);

/// One failed provider call, for the test that OpenSSL's errors are reported and the queue emptied: an
/// entry is raised (`ERR_R_PASSED_INVALID_ARGUMENT`) and the provider's cipher is called with a negative
/// length, which it refuses. Returns the cipher call's result (non-zero: it failed), or -1 when OpenSSL
/// could not be set up.
int fmdb_crypto_selftest_failing_call(void);

#endif
