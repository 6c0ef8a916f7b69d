// bench-c: the workloads through SQLCipher's C API directly — the physical limit for a wrapper.
// Usage: bench-c WORKLOAD MODE DBPATH   (WORKLOAD: insert scan lookup open service version; MODE: plain encrypted
//   passphrase)
// Prints: seconds checksum maxrss_kb (service, W6: also tps, p50_us, p99_us, p99_write_us, requests, writes,
//   failures; BENCH_CACHE_MISSES=1 adds page cache misses per read and per write, BENCH_KEY_CHECK=1 runs a keyed
//   FMDB pool's per-block key check before each request)
#include <sqlcipher/sqlite3.h>
#include "CFMDBCrypto.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>

static const char *RAW_KEY = "x'2DD29CA851E7B56E4697B0E1F08507293D761A05CE4D1B628663F411A8086D99'";
static const char *PASSPHRASE = "benchmark passphrase";

static long env_long(const char *name, long fallback) {
    const char *v = getenv(name);
    return v ? atol(v) : fallback;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Peak resident set of this program's own address space, in KiB: VmHWM, which starts afresh at exec.
   getrusage's ru_maxrss also keeps the peak of the process image before exec (the forked python that
   runs the benchmarks, ~14 MiB), which used to hide C's own figure. */
static long peak_rss_kb(void) {
    long kb = -1;
    char line[256];
    FILE *status = fopen("/proc/self/status", "r");
    if (status) {
        while (fgets(line, sizeof line, status)) {
            if (sscanf(line, "VmHWM: %ld", &kb) == 1) break;
        }
        fclose(status);
    }
    if (kb < 0) {
        struct rusage usage;
        getrusage(RUSAGE_SELF, &usage);
        kb = usage.ru_maxrss;
    }
    return kb;
}

static void die(sqlite3 *db, const char *what) {
    fprintf(stderr, "bench-c: %s: %s\n", what, db ? sqlite3_errmsg(db) : "?");
    exit(1);
}

/* The shared deterministic data: a 64-bit LCG (Knuth MMIX constants). */
static uint64_t lcg(uint64_t *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return *state >> 11;
}

static sqlite3 *open_db(const char *path, const char *mode) {
    sqlite3 *db = NULL;
    /* NOMUTEX, as the wrappers use: one thread per connection, no per-call mutex. */
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        die(db, "open");
    if (strcmp(mode, "encrypted") == 0) {
        if (sqlite3_key_v2(db, "main", RAW_KEY, (int)strlen(RAW_KEY)) != SQLITE_OK) die(db, "key");
    } else if (strcmp(mode, "passphrase") == 0) {
        if (sqlite3_key_v2(db, "main", PASSPHRASE, (int)strlen(PASSPHRASE)) != SQLITE_OK) die(db, "key");
    }
    const char *page = getenv("BENCH_CIPHER_PAGE_SIZE");
    if (page && strcmp(mode, "plain") != 0) {
        char sql[64];
        snprintf(sql, sizeof sql, "PRAGMA cipher_page_size = %s", page);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) die(db, "cipher_page_size");
    }
    /* BENCH_KEYED_DEFAULTS: the settings FMDB applies to every keyed connection (BENCHMARKS.md "Keyed
       connection defaults"), so a table row shows raw C with the same settings as the library. */
    const char *tuned = getenv("BENCH_KEYED_DEFAULTS");
    if (tuned && strcmp(mode, "plain") != 0) {
        char sql[96];
        snprintf(sql, sizeof sql, "PRAGMA temp_store = MEMORY; PRAGMA cache_size = %s", tuned);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) die(db, "keyed defaults");
    }
    if (sqlite3_exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL", NULL, NULL, NULL) != SQLITE_OK)
        die(db, "pragmas");
    return db;
}

/* W6: one thread per core, each with its own reader connection; writes go through one shared writer
   connection (a mutex), as a C service would keep them. Point reads, and 1 in 5 a write transaction
   (UPDATE one row, INSERT one log row). */
typedef struct {
    const char *path, *mode;
    long rows, thread;
    double deadline, checksum;
    double *latencies, *writes;  /* every request's latency; the write transactions' again, apart */
    long count, capacity, write_count, write_capacity, failures;
    long read_misses, write_misses;  /* page cache misses (BENCH_CACHE_MISSES=1) */
} service_thread;

/* BENCH_CACHE_MISSES=1: count each request's page cache misses (each one on a keyed file is a page read,
   authenticated and decrypted), the connection's SQLITE_DBSTATUS_CACHE_MISS read and reset after it. */
static int count_misses;
/* BENCH_KEY_CHECK=1: before each request, step and reset `PRAGMA schema_version` on the connection that
   serves it (prepared once), as a keyed FMDB queue or pool checks before each block that its connection
   still holds the file's key: an extra read transaction per request, measured apart from the wrapper. */
static int key_check;
static sqlite3_stmt *service_writer_check;

static long take_misses(sqlite3 *db) {
    int current = 0, highwater = 0;
    sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_MISS, &current, &highwater, 1);
    return current;
}

/* Appends `value` to the growing array `*list` of `*count` (capacity `*capacity`). */
static void append_latency(double **list, long *count, long *capacity, double value) {
    if (*count == *capacity) {
        *capacity = *capacity ? *capacity * 2 : 65536;
        *list = realloc(*list, sizeof(double) * (size_t)*capacity);
        if (!*list) { fprintf(stderr, "bench-c: out of memory\n"); exit(1); }
    }
    (*list)[(*count)++] = value;
}

static sqlite3 *service_writer;
static sqlite3_stmt *service_update, *service_log, *service_begin, *service_commit;
static pthread_mutex_t service_lock = PTHREAD_MUTEX_INITIALIZER;

static int step_reset(sqlite3_stmt *stmt) {
    int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    return rc;
}

static void *service_run(void *arg) {
    service_thread *me = arg;
    sqlite3 *db = open_db(me->path, me->mode);
    sqlite3_stmt *read, *check;
    if (sqlite3_prepare_v2(db, "SELECT a, s FROM t WHERE id = ?", -1, &read, NULL) != SQLITE_OK)
        die(db, "prepare read");
    if (sqlite3_prepare_v2(db, "PRAGMA schema_version", -1, &check, NULL) != SQLITE_OK) die(db, "prepare check");
    uint64_t state = 1000 + (uint64_t)me->thread;
    for (;;) {
        double t0 = now();
        if (t0 >= me->deadline) break;
        uint64_t r = lcg(&state);
        long id = (long)(r % (uint64_t)me->rows) + 1;
        int write = r % 5 == 0;
        if (write) {
            pthread_mutex_lock(&service_lock);
            if (key_check && step_reset(service_writer_check) != SQLITE_ROW) me->failures++;
            int ok = step_reset(service_begin) == SQLITE_DONE;
            sqlite3_bind_int64(service_update, 1, id);
            sqlite3_bind_int64(service_log, 1, id);
            ok = ok && step_reset(service_update) == SQLITE_DONE && step_reset(service_log) == SQLITE_DONE;
            ok = ok && step_reset(service_commit) == SQLITE_DONE;
            if (!ok) { sqlite3_exec(service_writer, "ROLLBACK", NULL, NULL, NULL); me->failures++; }
            if (count_misses) me->write_misses += take_misses(service_writer);
            pthread_mutex_unlock(&service_lock);
        } else {
            if (key_check && step_reset(check) != SQLITE_ROW) me->failures++;
            sqlite3_bind_int64(read, 1, id);
            int rc = sqlite3_step(read);
            if (rc == SQLITE_ROW) {
                me->checksum += (double)sqlite3_column_int64(read, 0);
                (void)sqlite3_column_text(read, 1);
            } else {
                me->failures++;
            }
            sqlite3_reset(read);
            if (count_misses) me->read_misses += take_misses(db);
        }
        double latency = now() - t0;
        append_latency(&me->latencies, &me->count, &me->capacity, latency);
        if (write) append_latency(&me->writes, &me->write_count, &me->write_capacity, latency);
    }
    sqlite3_finalize(read);
    sqlite3_finalize(check);
    sqlite3_close(db);
    return NULL;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The `permille`th per-mille of `count` sorted latencies, in microseconds (0 with none). */
static double percentile_us(const double *sorted, long count, long permille) {
    return count ? sorted[count * permille / 1000] * 1e6 : 0;
}

static void service(const char *path, const char *mode) {
    long threads = env_long("BENCH_THREADS", sysconf(_SC_NPROCESSORS_ONLN));
    long rows = env_long("BENCH_SERVICE_ROWS", 10000);
    double seconds = (double)env_long("BENCH_SECONDS", 5);
    if (threads < 1) threads = 1;
    count_misses = env_long("BENCH_CACHE_MISSES", 0) != 0;
    key_check = env_long("BENCH_KEY_CHECK", 0) != 0;
    service_writer = open_db(path, mode);
    sqlite3 *w = service_writer;
    if (sqlite3_exec(w, "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, s TEXT);"
                        "CREATE TABLE log (id INTEGER PRIMARY KEY, t_id INTEGER); BEGIN", NULL, NULL, NULL)
        != SQLITE_OK)
        die(w, "schema");
    sqlite3_stmt *insert;
    if (sqlite3_prepare_v2(w, "INSERT INTO t (id, a, s) VALUES (?, ?, ?)", -1, &insert, NULL) != SQLITE_OK)
        die(w, "prepare");
    for (long i = 1; i <= rows; i++) {
        char text[16];
        snprintf(text, sizeof text, "name-%07ld", i % 10000000);
        sqlite3_bind_int64(insert, 1, i);
        sqlite3_bind_int64(insert, 2, i);
        sqlite3_bind_text(insert, 3, text, -1, SQLITE_TRANSIENT);
        if (step_reset(insert) != SQLITE_DONE) die(w, "insert");
    }
    sqlite3_finalize(insert);
    if (sqlite3_exec(w, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) die(w, "commit");
    if (sqlite3_prepare_v2(w, "BEGIN IMMEDIATE", -1, &service_begin, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(w, "COMMIT", -1, &service_commit, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(w, "UPDATE t SET a = a + 1 WHERE id = ?", -1, &service_update, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(w, "INSERT INTO log (t_id) VALUES (?)", -1, &service_log, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(w, "PRAGMA schema_version", -1, &service_writer_check, NULL) != SQLITE_OK)
        die(w, "prepare writes");
    (void)take_misses(w);  /* the seeding's misses are not the service's */
    service_thread *all = calloc((size_t)threads, sizeof *all);
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    if (!all || !ids) die(NULL, "out of memory");
    double start = now();
    for (long t = 0; t < threads; t++) {
        all[t] = (service_thread){.path = path, .mode = mode, .rows = rows, .thread = t, .deadline = start + seconds};
        pthread_create(&ids[t], NULL, service_run, &all[t]);
    }
    long total = 0, failures = 0, read_misses = 0, write_misses = 0;
    double checksum = 0;
    for (long t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        read_misses += all[t].read_misses;
        write_misses += all[t].write_misses;
        total += all[t].count;
        failures += all[t].failures;
        checksum += all[t].checksum;
    }
    double elapsed = now() - start;
    long writes = 0;
    for (long t = 0; t < threads; t++) writes += all[t].write_count;
    double *merged = malloc(sizeof(double) * (size_t)(total ? total : 1));
    double *merged_writes = malloc(sizeof(double) * (size_t)(writes ? writes : 1));
    if (!merged || !merged_writes) die(NULL, "out of memory");
    long k = 0, kw = 0;
    for (long t = 0; t < threads; t++) {
        memcpy(merged + k, all[t].latencies, sizeof(double) * (size_t)all[t].count);
        k += all[t].count;
        memcpy(merged_writes + kw, all[t].writes, sizeof(double) * (size_t)all[t].write_count);
        kw += all[t].write_count;
        free(all[t].latencies);
        free(all[t].writes);
    }
    qsort(merged, (size_t)total, sizeof(double), compare_doubles);
    qsort(merged_writes, (size_t)writes, sizeof(double), compare_doubles);
    printf("%.6f %.2f %ld tps=%.0f p50_us=%.1f p99_us=%.1f p99_write_us=%.1f requests=%ld writes=%ld failures=%ld",
           elapsed, checksum, peak_rss_kb(), total / elapsed, percentile_us(merged, total, 500),
           percentile_us(merged, total, 990), percentile_us(merged_writes, writes, 990), total, writes, failures);
    if (count_misses) {
        printf(" misses_per_read=%.3f misses_per_write=%.3f",
               (double)read_misses / (double)(total - writes ? total - writes : 1),
               (double)write_misses / (double)(writes ? writes : 1));
    }
    printf("\n");
    free(merged_writes);
    free(merged);
    free(all);
    free(ids);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench-c WORKLOAD MODE DBPATH\n");
        return 64;
    }
    const char *workload = argv[1], *mode = argv[2], *path = argv[3];
    /* BENCH_PROVIDER=fmdb: raw C with FMDBCipher's crypto provider (BENCHMARKS.md "SQLCipher crypto provider"),
       registered as the library does: while a scratch keyed in-memory connection, kept open, holds
       SQLCipher's activation, and only on the versions whose provider layout was verified. */
    const char *provider = getenv("BENCH_PROVIDER");
    if (provider && strcmp(provider, "fmdb") == 0) {
        sqlite3 *scratch = open_db(":memory:", "encrypted");
        sqlite3_stmt *stmt = NULL;
        int layout = 0;
        if (sqlite3_prepare_v2(scratch, "PRAGMA cipher_version", -1, &stmt, NULL) != SQLITE_OK)
            die(scratch, "cipher_version");
        if (sqlite3_step(stmt) == SQLITE_ROW) {
            const char *version = (const char *)sqlite3_column_text(stmt, 0);
            if (version && strcmp(version, "3.4.1") == 0) layout = FMDB_CRYPTO_LAYOUT_SQLCIPHER_3_4_1;
            if (version && strcmp(version, "4.6.1 community") == 0) layout = FMDB_CRYPTO_LAYOUT_SQLCIPHER_4_6_1;
        }
        sqlite3_finalize(stmt);
        if (layout == 0 || fmdb_crypto_register(layout) != 0) die(scratch, "BENCH_PROVIDER=fmdb: not registered");
    }
    long rows = env_long("BENCH_ROWS", 200000), lookups = env_long("BENCH_LOOKUPS", 50000),
         opens = env_long("BENCH_OPENS", 50);
    double checksum = 0, start = 0, elapsed = 0;

    if (strcmp(workload, "insert") == 0) {
        sqlite3 *db = open_db(path, mode);
        if (sqlite3_exec(db, "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, r REAL, s TEXT, b BLOB)", NULL, NULL,
                         NULL) != SQLITE_OK)
            die(db, "create");
        start = now();
        sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
        sqlite3_stmt *stmt;
        if (sqlite3_prepare_v2(db, "INSERT INTO t (id, a, r, s, b) VALUES (?, ?, ?, ?, ?)", -1, &stmt, NULL)
            != SQLITE_OK)
            die(db, "prepare");
        uint64_t state = 42;
        char text[32];
        unsigned char blob[32];
        for (long i = 1; i <= rows; i++) {
            int64_t a = (int64_t)(lcg(&state) % 1000000);
            double r = (double)(lcg(&state) % 100000) / 100.0;
            snprintf(text, sizeof text, "name-%07ld", i % 10000000);
            for (int k = 0; k < 32; k++) blob[k] = (unsigned char)(lcg(&state) & 0xFF);
            sqlite3_bind_int64(stmt, 1, i);
            sqlite3_bind_int64(stmt, 2, a);
            sqlite3_bind_double(stmt, 3, r);
            sqlite3_bind_text(stmt, 4, text, -1, SQLITE_TRANSIENT);
            sqlite3_bind_blob(stmt, 5, blob, 32, SQLITE_TRANSIENT);
            if (sqlite3_step(stmt) != SQLITE_DONE) die(db, "insert");
            sqlite3_reset(stmt);
            checksum += (double)a + r;
        }
        sqlite3_finalize(stmt);
        if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) die(db, "commit");
        elapsed = now() - start;
        sqlite3_close(db);
    } else if (strcmp(workload, "scan") == 0) {
        sqlite3 *db = open_db(path, mode);
        start = now();
        sqlite3_stmt *stmt;
        if (sqlite3_prepare_v2(db, "SELECT id, a, r, s, b FROM t", -1, &stmt, NULL) != SQLITE_OK) die(db, "prepare");
        while (sqlite3_step(stmt) == SQLITE_ROW) {
            checksum += (double)sqlite3_column_int64(stmt, 0) + (double)sqlite3_column_int64(stmt, 1)
                        + sqlite3_column_double(stmt, 2);
            const unsigned char *s = sqlite3_column_text(stmt, 3);
            checksum += (double)sqlite3_column_bytes(stmt, 3) + (s ? s[0] : 0);
            const unsigned char *b = sqlite3_column_blob(stmt, 4);
            int n = sqlite3_column_bytes(stmt, 4);
            if (b && n > 0) checksum += b[0] + b[n - 1];
        }
        sqlite3_finalize(stmt);
        elapsed = now() - start;
        sqlite3_close(db);
    } else if (strcmp(workload, "lookup") == 0) {
        sqlite3 *db = open_db(path, mode);
        start = now();
        sqlite3_stmt *stmt;
        if (sqlite3_prepare_v2(db, "SELECT a, r, s, b FROM t WHERE id = ?", -1, &stmt, NULL) != SQLITE_OK)
            die(db, "prepare");
        uint64_t state = 7;
        for (long i = 0; i < lookups; i++) {
            sqlite3_bind_int64(stmt, 1, (int64_t)(lcg(&state) % (uint64_t)rows) + 1);
            if (sqlite3_step(stmt) == SQLITE_ROW) {
                checksum += (double)sqlite3_column_int64(stmt, 0) + sqlite3_column_double(stmt, 1);
                checksum += (double)sqlite3_column_bytes(stmt, 2) + (double)sqlite3_column_bytes(stmt, 3);
            }
            sqlite3_reset(stmt);
        }
        sqlite3_finalize(stmt);
        elapsed = now() - start;
        sqlite3_close(db);
    } else if (strcmp(workload, "rekey") == 0) {
        /* Key rotation in the file's own journal mode: every page read, decrypted, re-encrypted, written. */
        sqlite3 *db = NULL;
        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) die(db, "open");
        if (sqlite3_key_v2(db, "main", RAW_KEY, (int)strlen(RAW_KEY)) != SQLITE_OK) die(db, "key");
        const char *tuned = getenv("BENCH_KEYED_DEFAULTS");
        if (tuned) {
            char sql[64];
            snprintf(sql, sizeof sql, "PRAGMA cache_size = %s", tuned);
            if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) die(db, "keyed defaults");
        }
        static const char *NEW_KEY = "x'D2D29CA851E7B56E4697B0E1F08507293D761A05CE4D1B628663F411A8086D99'";
        start = now();
        if (sqlite3_rekey_v2(db, "main", NEW_KEY, (int)strlen(NEW_KEY)) != SQLITE_OK) die(db, "rekey");
        elapsed = now() - start;
        sqlite3_stmt *stmt;
        if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &stmt, NULL) != SQLITE_OK)
            die(db, "verify");
        if (sqlite3_step(stmt) == SQLITE_ROW) checksum = (double)sqlite3_column_int64(stmt, 0);
        sqlite3_finalize(stmt);
        sqlite3_close(db);
    } else if (strcmp(workload, "service") == 0) {
        service(path, mode);
        return 0;
    } else if (strcmp(workload, "version") == 0) {
        /* The SQLCipher this executable runs (PRAGMA cipher_version): Scripts/bench checks it is the line it
           built against. */
        sqlite3 *db = open_db(path, mode);
        sqlite3_stmt *stmt;
        if (sqlite3_prepare_v2(db, "PRAGMA cipher_version", -1, &stmt, NULL) != SQLITE_OK) die(db, "cipher_version");
        if (sqlite3_step(stmt) != SQLITE_ROW) die(db, "cipher_version");
        printf("%s\n", (const char *)sqlite3_column_text(stmt, 0));
        sqlite3_finalize(stmt);
        sqlite3_close(db);
        return 0;
    } else if (strcmp(workload, "open") == 0) {
        start = now();
        for (long i = 0; i < opens; i++) {
            sqlite3 *db = NULL;
            if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
                die(db, "open");
            if (strcmp(mode, "encrypted") == 0) sqlite3_key_v2(db, "main", RAW_KEY, (int)strlen(RAW_KEY));
            if (strcmp(mode, "passphrase") == 0) sqlite3_key_v2(db, "main", PASSPHRASE, (int)strlen(PASSPHRASE));
            sqlite3_stmt *stmt;
            if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &stmt, NULL) != SQLITE_OK)
                die(db, "first query");
            if (sqlite3_step(stmt) != SQLITE_ROW) die(db, "first query");
            checksum += (double)sqlite3_column_int64(stmt, 0);
            sqlite3_finalize(stmt);
            sqlite3_close(db);
        }
        elapsed = now() - start;
    } else {
        fprintf(stderr, "bench-c: unknown workload %s\n", workload);
        return 64;
    }
    printf("%.6f %.2f %ld\n", elapsed, checksum, peak_rss_kb());
    return 0;
}
