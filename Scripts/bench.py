#!/usr/bin/env python3
"""Runs the benchmark executables interleaved (A B C A B C ...) and prints one table.

Each measurement is its own process (`bench-X WORKLOAD MODE DBPATH [VARIANT]`, printing
`seconds checksum maxrss_kb`), so peak memory is per workload and nothing is cached between them.
Ratios are to raw C within the same run: absolute times drift 20-50% between runs on a shared machine.
W6 (the service workload: a WAL pool serving point reads and write transactions from one thread per core for a
fixed time) runs in the same rounds, each program on a fresh file, and prints its own table: medians of
transactions/s and latencies, and each round's p99 ratio to raw C, so the spread is seen, not hidden.
With --static-bin (the Swift programs built with --static-swift-stdlib), each W1-W3 cell of a Swift
implementation also runs once (first round) from there, for its peak RSS: the table shows what linking the
Swift runtime and Foundation statically saves (the times are the dynamic builds').
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

SIZES = {"full": dict(BENCH_ROWS="200000", BENCH_LOOKUPS="50000", BENCH_OPENS="50"),
         "smoke": dict(BENCH_ROWS="2000", BENCH_LOOKUPS="500", BENCH_OPENS="3")}
# W6: seconds per run, rows, and the slotted run (through an operator's slot change and data-key rotation):
# its seconds, and in smoke runs a PBKDF2 slot KDF of 1,000 iterations instead of scrypt (times mean nothing).
SERVICE = {"full": dict(BENCH_SECONDS="5", BENCH_SERVICE_ROWS="10000"),
           "smoke": dict(BENCH_SECONDS="1", BENCH_SERVICE_ROWS="1000")}
SERVICE_SLOTS = {"full": dict(BENCH_SECONDS="15"), "smoke": dict(BENCH_SECONDS="1", BENCH_SLOT_KDF_ITERATIONS="1000")}
# Raw C keyed runs W6 with the library's crypto provider and keyed cache, so the rows differ only by the wrapper.
SERVICE_C_KEYED = dict(BENCH_PROVIDER="fmdb", BENCH_KEYED_DEFAULTS="-8192")
SERVICE_IMPLS = [("plain", "c"), ("plain", "fmdb"), ("plain", "grdb"), ("encrypted", "c"), ("encrypted", "fmdb")]
RAW_MODES = ["plain", "encrypted", "encrypted4k"]  # encrypted4k: raw key with PRAGMA cipher_page_size = 4096
# The settings FMDB applies to every keyed connection (FMDatabase.keyedConnectionCacheSizeKiB): the
# "c-keyed-defaults" rows run raw C with them, so the table separates the wrapper from the setting.
KEYED_CACHE_SIZE = "-8192"


def run(binary, args, env):
    out = subprocess.run([binary] + args, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"bench: {os.path.basename(binary)} {' '.join(args)} failed: {out.stderr.strip()}")
    fields = out.stdout.split()
    return float(fields[0]), fields[1], int(fields[2]), " ".join(fields[3:])


def fields_of(extra):
    """The key=value pairs a W6 run prints after seconds, checksum and peak RSS."""
    return dict(part.split("=", 1) for part in extra.split() if "=" in part)


def runtime_version(binary, args):
    out = subprocess.run([binary] + args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench: {os.path.basename(binary)} {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--static-bin", help="the same executables built with --static-swift-stdlib")
    parser.add_argument("--only", choices=["W1-W5", "W6"], help="run only these workloads")
    parser.add_argument("--expect-version", help="fail unless the executables run this SQLCipher (cipher_version)")
    args = parser.parse_args()
    size = "smoke" if args.smoke else "full"
    rounds = 1 if args.smoke else args.rounds
    base_env = dict(os.environ, **SIZES[size])
    binary = {name: os.path.join(args.bin, f"bench-{name}") for name in ("c", "fmdb", "grdb")}
    work = tempfile.mkdtemp(prefix="fmdb-bench-")
    results = {}   # (workload, mode, impl) -> list of (seconds, checksum, rss, extra)
    static_results = {}   # the same keys, the static builds' runs (first round only)
    static_binary = {name: os.path.join(args.static_bin, f"bench-{name}") for name in ("fmdb", "grdb")} if args.static_bin else {}
    run_core = args.only != "W6"
    run_service = args.only != "W1-W5"
    service_results = {}   # (mode, impl) -> list of dicts (the run's key=value fields, rss_kb)
    slot_results = []      # the slotted runs' fields
    loads = []             # the 1-minute load average at the start of each W6 run

    # Which SQLCipher the executables run, checked at run time (ldd only shows what they would load).
    versions = {name: runtime_version(binary[name], ["version", "plain", ":memory:", "-"]) for name in ("c", "fmdb")}
    print("SQLCipher at run time (PRAGMA cipher_version): " + ", ".join(f"bench-{n} {v}" for n, v in versions.items()), flush=True)
    if args.expect_version and any(not v.startswith(args.expect_version) for v in versions.values()):
        sys.exit(f"bench: expected SQLCipher {args.expect_version} at run time, got {versions}")

    def run_service_once(r, mode, name):
        path = os.path.join(work, f"service-{name}-{mode}-{r}.db")
        env = dict(base_env, **SERVICE[size])
        if name == "c" and mode == "encrypted":
            env.update(SERVICE_C_KEYED)
        loads.append(os.getloadavg()[0])
        cmd = ["service", mode, path] + (["pool"] if name == "fmdb" else [])
        _, _, rss, extra = run(binary[name], cmd, env)
        fields = fields_of(extra)
        # A failed request is counted and shown (GRDB's pool met an occasional one on the loaded machine); a run
        # that served nothing fails the benchmark.
        if int(fields.get("requests", "0")) == 0 or "failures" not in fields:
            sys.exit(f"bench: W6 bench-{name} {mode}: {extra}")
        service_results.setdefault((mode, name), []).append(dict(fields, rss_kb=rss))

    def run_service_slots(r):
        path = os.path.join(work, f"service-slots-{r}.db")
        env = {**base_env, **SERVICE[size], **SERVICE_SLOTS[size]}
        loads.append(os.getloadavg()[0])
        _, _, _, extra = run(binary["fmdb"], ["service", "encrypted", path, "slots"], env)
        fields = fields_of(extra)
        if int(fields.get("requests", "0")) == 0 or "rps_rotation" not in fields:
            sys.exit(f"bench: W6 bench-fmdb slots: {extra}")
        slot_results.append(fields)

    def env_for(mode):
        env = dict(base_env)
        if mode == "encrypted4k":
            env["BENCH_CIPHER_PAGE_SIZE"] = "4096"
        return env

    def cmode(mode):  # the executables know plain / encrypted; 4k is the same key with a page size
        return "encrypted" if mode.startswith("encrypted") else mode

    def record(key, value):
        results.setdefault(key, []).append(value)

    # fmdb-compat: FMDB's API with getters by column name; fmdb-index: the same with getters by index.
    impls = [("c", "c", None), ("c-keyed-defaults", "c", None), ("fmdb-fast", "fmdb", "fast"),
             ("fmdb-compat", "fmdb", "compat"), ("fmdb-index", "fmdb", "compat-index"), ("grdb", "grdb", None),
             ("fmdb-codable", "fmdb", "codable")]

    def skip(name, exe, mode, workload="scan"):
        # fmdb-codable ("W2 through Codable") reads rows only: the scan, not the inserts or lookups.
        return ((exe == "grdb" and mode != "plain") or (name == "c-keyed-defaults" and mode == "plain")
                or (name == "fmdb-codable" and workload != "scan"))

    def env_impl(env, name):
        return dict(env, BENCH_KEYED_DEFAULTS=KEYED_CACHE_SIZE) if name == "c-keyed-defaults" else env

    def run_static(r, key, exe, make_args, env):
        if r == 0 and exe in static_binary:
            static_results[key] = run(static_binary[exe], make_args("static"), env)
    try:
        for r in range(rounds):
            print(f"round {r + 1}/{rounds}", file=sys.stderr)
            if run_service:
                # Interleaved, and the order turned by one each round, so no program always runs first.
                order = SERVICE_IMPLS[r % len(SERVICE_IMPLS):] + SERVICE_IMPLS[:r % len(SERVICE_IMPLS)]
                for mode, name in order:
                    run_service_once(r, mode, name)
                run_service_slots(r)
            for mode in (RAW_MODES if run_core else []):
                env = env_for(mode)
                # W1 insert: a fresh file per implementation; C's file then serves W2 and W3 for everyone.
                for name, exe, variant in impls:
                    if skip(name, exe, mode, "insert"):
                        continue
                    def insert_args(tag):
                        path = os.path.join(work, f"insert-{name}-{mode}-{r}{tag}.db")
                        return ["insert", cmode(mode), path] + ([variant] if variant else [])
                    record(("W1 insert", mode, name), run(binary[exe], insert_args(""), env_impl(env, name)))
                    run_static(r, ("W1 insert", mode, name), exe, insert_args, env_impl(env, name))
                source = os.path.join(work, f"insert-c-{mode}-{r}.db")
                for workload, label in (("scan", "W2 scan"), ("lookup", "W3 lookup")):
                    for name, exe, variant in impls:
                        if skip(name, exe, mode, workload):
                            continue
                        read_args = [workload, cmode(mode), source] + ([variant] if variant else [])
                        record((label, mode, name), run(binary[exe], read_args, env_impl(env, name)))
                        run_static(r, (label, mode, name), exe, lambda _: read_args, env_impl(env, name))
            if run_core:
                # W4 open: 50 x (open, key, first query, close).
                plain_db = os.path.join(work, f"insert-c-plain-{r}.db")
                raw_db = os.path.join(work, f"insert-c-encrypted-{r}.db")
                pass_db = os.path.join(work, f"passphrase-{r}.db")
                small = dict(base_env, BENCH_ROWS="10")
                run(binary["c"], ["insert", "passphrase", pass_db], small)
                for name, exe, args_ in (("c plain", "c", ["open", "plain", plain_db]),
                                         ("fmdb plain", "fmdb", ["open", "plain", plain_db, "plain"]),
                                         ("grdb plain", "grdb", ["open", "plain", plain_db]),
                                         ("c raw key", "c", ["open", "encrypted", raw_db]),
                                         ("fmdb raw key", "fmdb", ["open", "encrypted", raw_db, "raw"]),
                                         ("fmdb PBKDF2KeyProvider reused", "fmdb", ["open", "encrypted", pass_db, "pbkdf2"]),
                                         ("c passphrase", "c", ["open", "passphrase", pass_db]),
                                         ("fmdb passphrase", "fmdb", ["open", "encrypted", pass_db, "passphrase"])):
                    record(("W4 open", "", name), run(binary[exe], args_, base_env))
                # W5: the same lookups through a queue (1 thread) and a pool (2 threads), WAL.
                for variant in ("queue", "pool"):
                    record(("W5 pool", "plain", f"fmdb {variant}"), run(binary["fmdb"], ["pool", "plain", plain_db, variant], base_env))
            for f in os.listdir(work):
                os.remove(os.path.join(work, f))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def median(key):
        return statistics.median(v[0] for v in results[key])

    def print_core_tables():
        print(f"\nFMDBCipher benchmarks ({size} sizes: {SIZES[size]['BENCH_ROWS']} rows, {SIZES[size]['BENCH_LOOKUPS']} lookups, "
              f"{SIZES[size]['BENCH_OPENS']} opens; {rounds} round(s), median seconds; ratio to raw C in the same run)\n")
        rss_title = "peak RSS MiB, dynamic / static Swift runtime" if static_binary else "peak RSS MiB"
        print(f"| workload | mode | implementation | median s | vs C | vs C plain | checksum | {rss_title} |")
        print(f"| --- | --- | --- | ---: | ---: | ---: | --- | ---: |")
        mismatches = 0
        for workload in ("W1 insert", "W2 scan", "W3 lookup"):
            for mode in RAW_MODES:
                c_key = (workload, mode, "c")
                for name, _, _ in impls:
                    key = (workload, mode, name)
                    if key not in results:
                        continue
                    checksums = {v[1] for v in results[key]} | {v[1] for v in results[c_key]}
                    if key in static_results:
                        checksums.add(static_results[key][1])
                    ok = "same" if len(checksums) == 1 else "DIFFERS"
                    mismatches += ok != "same"
                    rss = f"{statistics.median(v[2] for v in results[key]) / 1024:.1f}"
                    if key in static_results:
                        rss += f" / {static_results[key][2] / 1024:.1f}"
                    vs_plain = median(key) / median((workload, "plain", "c"))
                    print(f"| {workload} | {mode} | {name} | {median(key):.3f} | {median(key) / median(c_key):.2f}x | {vs_plain:.2f}x | {ok} | {rss} |")
        c_raw = median(("W4 open", "", "c raw key"))
        for name in ("c plain", "fmdb plain", "grdb plain", "c raw key", "fmdb raw key", "fmdb PBKDF2KeyProvider reused",
                     "c passphrase", "fmdb passphrase"):
            key = ("W4 open", "", name)
            extra = results[key][0][3]
            print(f"| W4 open | | {name} | {median(key):.3f} | {median(key) / c_raw:.2f}x of C raw key | | {extra} |")
        queue = median(("W5 pool", "plain", "fmdb queue"))
        pool = median(("W5 pool", "plain", "fmdb pool"))
        print(f"| W5 pool | plain | fmdb queue, 1 thread | {queue:.3f} | | | |")
        print(f"| W5 pool | plain | fmdb pool, 2 threads | {pool:.3f} | {queue / pool:.2f}x the lookups/s of the queue | | |")
        print("\nW2 through Codable (FMResultSet.decode into a struct, by column name) / by-index getters, same run:")
        for mode in RAW_MODES:
            print(f"  {mode}: {median(('W2 scan', mode, 'fmdb-codable')) / median(('W2 scan', mode, 'fmdb-index')):.2f}x")
        print("\nEncryption cost (encrypted / plain, same implementation):")
        for workload in ("W1 insert", "W2 scan", "W3 lookup"):
            parts = []
            for name in ("c", "fmdb-fast"):
                plain = median((workload, "plain", name))
                parts.append(f"{name} {median((workload, 'encrypted', name)) / plain:.2f}x (4096-byte cipher pages: "
                             f"{median((workload, 'encrypted4k', name)) / plain:.2f}x)")
            print(f"  {workload}: " + "; ".join(parts))
        return mismatches

    def print_service_tables():
        def med(mode, name, field):
            return statistics.median(float(v[field]) for v in service_results[(mode, name)])

        def per_round(mode, name, field, other_mode, other):
            mine, theirs = service_results[(mode, name)], service_results[(other_mode, other)]
            return [float(a[field]) / float(b[field]) for a, b in zip(mine, theirs)]

        def ratios(values):
            text = f"{statistics.median(values):.2f}x"
            return text if len(values) == 1 else text + " (" + " / ".join(f"{v:.2f}" for v in values) + ")"

        threads = os.environ.get("BENCH_THREADS") or str(os.cpu_count())
        print(f"\nW6 service ({size}: {SERVICE[size]['BENCH_SECONDS']} s a run, {SERVICE[size]['BENCH_SERVICE_ROWS']} rows, "
              f"one thread per core ({threads}), 1 request in 5 a write transaction; {rounds} round(s), medians; the ratios "
              f"are each round's, median first; 1-minute load average {min(loads):.1f}-{max(loads):.1f})\n")
        print("| mode | implementation | transactions/s | p50 µs | p99 µs | p99 of writes µs | tx/s vs C | p99 vs C "
              "| tx/s vs GRDB (plain) | peak RSS MiB | failed requests |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for mode, name in SERVICE_IMPLS:
            label = {"c": "c (library's provider, 8 MiB cache)" if mode == "encrypted" else "c", "fmdb": "fmdb pool",
                     "grdb": "grdb DatabasePool"}[name]
            print(f"| {mode} | {label} | {med(mode, name, 'tps'):,.0f} | {med(mode, name, 'p50_us'):.1f} "
                  f"| {med(mode, name, 'p99_us'):.1f} | {med(mode, name, 'p99_write_us'):.1f} "
                  f"| {ratios(per_round(mode, name, 'tps', mode, 'c'))} | {ratios(per_round(mode, name, 'p99_us', mode, 'c'))} "
                  f"| {ratios(per_round(mode, name, 'tps', 'plain', 'grdb'))} | {med(mode, name, 'rss_kb') / 1024:.1f} "
                  f"| {sum(int(v['failures']) for v in service_results[(mode, name)])} |")
        if slot_results:
            def smed(field):
                return statistics.median(float(v[field]) for v in slot_results)
            print(f"\nW6 through operator actions (bench-fmdb service encrypted DB slots: a slotted database, "
                  f"{SERVICE_SLOTS[size]['BENCH_SECONDS']} s, a slot change at 1/3, a data-key rotation at 2/3; medians "
                  f"of {len(slot_results)}): {smed('tps'):,.0f} requests/s over the run, {smed('rps_slot_change'):,.0f} "
                  f"through the slot change ({smed('slot_change_ms'):.0f} ms), {smed('rps_rotation'):,.0f} through the "
                  f"rotation ({smed('rotation_ms'):.0f} ms); failed requests per run: "
                  + " / ".join(v.get("failures", "?") for v in slot_results))

    mismatches = 0
    if run_core:
        mismatches = print_core_tables()
    if run_service:
        print_service_tables()
    if mismatches:
        sys.exit(f"bench: {mismatches} checksum mismatches: an implementation skipped or changed work")


if __name__ == "__main__":
    main()
