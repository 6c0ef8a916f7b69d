# SQLCipher built from source into a private prefix, beside the system's 3.4.1: the newest SQLCipher
# (SQLCIPHER_NEWEST_VERSION, the amalgamation PyPI's sqlcipher3 sdist vendors), Debian sid's `sqlcipher`
# source package, or any SQLCipher source tree given by path (a release checkout, say v4.5.6). Sourced like
# Scripts/sqlcipher4.sh, whose linking rules it follows: nothing is installed system-wide (apt-get runs
# with its own source list, package lists and cache under the line's folder), the private pkg-config folder
# holds a sqlcipher.pc for the prefix and a libcrypto.pc without -L/-I, and the build passes the rpath with
# -Xlinker. Cached: a second run with the same source does nothing; the newest line's download and library
# are also kept in the user's cache folder (SQLCIPHER_CACHE), keyed by version and checksum, so a fresh
# clone on the same machine reuses them.
#
# The library is built from SQLCipher's amalgamation (sqlite3.c: the one a release's configure makes,
# autoconf or autosetup, or one given ready-made), compiled here with Debian's flags (debian/rules of the
# sid package: its CFLAGS and what its configure options amount to; see SQLCIPHER_SOURCE_CFLAGS) into
# libsqlcipher.so.2, the soname of Debian's libsqlcipher2, so that ldd tells it from the system's
# libsqlcipher.so.0 and from the 4.6.1 line's libsqlcipher.so.1. The shell is built from the same tree and
# linked to that library; an amalgamation without shell.c (PyPI's) gets none, and the tests that need the
# line's own shell skip, saying so.
#
#   source Scripts/sqlcipher-source.sh
#   sqlcipher_source_use DIR                  # optional: the line's folder (default .build-sqlcipher-source)
#   sqlcipher_source_install "$(sqlcipher_newest_fetch)"   # the newest SQLCipher
#   sqlcipher_source_install                  # Debian sid's source package
#   sqlcipher_source_install /path/to/tree    # or a source tree, or a folder with sqlite3.c and sqlite3.h
#   with_sqlcipher_source swift build --build-tests "${SQLCIPHER_SOURCE_SWIFT_ARGS[@]}"
#   with_sqlcipher_source sqlcipher_verify "$(sqlcipher_source_version)" BINDIR "$SQLCIPHER_SOURCE_LIBDIR"

# sqlcipher_source_use DIR: the line's folder; sets the variables below (prefix, pkg-config folder, shell
# folder, Swift build folder and arguments), which the other functions read when called.
sqlcipher_source_use() {
    SQLCIPHER_SOURCE_DIR="$1"
    SQLCIPHER_SOURCE_PREFIX="$SQLCIPHER_SOURCE_DIR/prefix/usr"
    SQLCIPHER_SOURCE_LIBDIR="$SQLCIPHER_SOURCE_PREFIX/lib"
    SQLCIPHER_SOURCE_PKGCONFIG="$SQLCIPHER_SOURCE_DIR/pkgconfig"
    SQLCIPHER_SOURCE_BIN="$SQLCIPHER_SOURCE_DIR/bin"
    # The line's own build folder, so no two lines share build products.
    SQLCIPHER_SOURCE_SCRATCH="$SQLCIPHER_SOURCE_DIR/build"
    # The swift build/test arguments of the line; use as: swift build "${SQLCIPHER_SOURCE_SWIFT_ARGS[@]}".
    SQLCIPHER_SOURCE_SWIFT_ARGS=(--scratch-path "$SQLCIPHER_SOURCE_SCRATCH" -Xlinker -rpath -Xlinker
        "$SQLCIPHER_SOURCE_LIBDIR")
}
sqlcipher_source_use "${SQLCIPHER_SOURCE_DIR:-$PWD/.build-sqlcipher-source}"
SQLCIPHER_SOURCE_SONAME="libsqlcipher.so.2"
# Downloads and built libraries that outlive a clone, keyed by version and checksum (in the clone when
# there is no home folder).
SQLCIPHER_CACHE="${SQLCIPHER_CACHE:-${XDG_CACHE_HOME:-${HOME:-$PWD/.build-sqlcipher-cache}/.cache}/fmdb-cipher}"
# The newest SQLCipher (Debian sid's version; its source package's files cannot always be downloaded, so
# CI takes the same release's amalgamation from PyPI): the sqlcipher3 sdist of this version vendors it
# (vendor/sqlite3.c, vendor/sqlite3.h), fetched by name from the package index pip uses, and accepted only
# when its sha256 is the one pinned here and the one the index states.
SQLCIPHER_NEWEST_VERSION="4.19.0"
SQLCIPHER_NEWEST_PYPI=(sqlcipher3 0.6.4 b02a3edfc554c9197d63ab4c38a30f7682eec65b10e5be2c9285a0d6ffb7a29a)
# Debian's CFLAGS (debian/rules) and the defines its configure options give (--enable-threadsafe,
# --enable-load-extension, --enable-tempstore, --enable-fts4, --enable-fts5, --enable-json, OpenSSL) and
# the HAVE_* facts configure finds on Linux (glibc).
# Left out: SQLITE_ENABLE_UPDATE_DELETE_LIMIT, which needs a parser generated for it (the amalgamation's
# is not); no test of this project uses DELETE ... LIMIT.
SQLCIPHER_SOURCE_CFLAGS=(-O2 -g -fPIC -fno-strict-aliasing -fstack-protector-strong -D_FORTIFY_SOURCE=2
    -DSQLITE_HAS_CODEC -DSQLCIPHER_CRYPTO_OPENSSL -DSQLITE_TEMP_STORE=2 -DSQLITE_THREADSAFE=1
    -DSQLITE_SECURE_DELETE -DSQLITE_ENABLE_COLUMN_METADATA -DSQLITE_ENABLE_FTS3 -DSQLITE_ENABLE_FTS4
    -DSQLITE_ENABLE_FTS5 -DSQLITE_ENABLE_JSON1 -DSQLITE_ENABLE_RTREE=1 -DSQLITE_SOUNDEX=1
    -DSQLITE_ENABLE_UNLOCK_NOTIFY -DSQLITE_OMIT_LOOKASIDE=1 -DSQLITE_MAX_SCHEMA_RETRY=25 -DHAVE_USLEEP=1
    -DHAVE_STDINT_H=1 -DHAVE_INTTYPES_H=1 -DHAVE_FDATASYNC=1 -DHAVE_GMTIME_R=1 -DHAVE_LOCALTIME_R=1
    -DHAVE_ISNAN=1 -DHAVE_STRCHRNUL=1 -DHAVE_POSIX_FALLOCATE=1)

# sqlcipher_source_fetch_sid: downloads and unpacks the sid `sqlcipher` source package under the line's
# folder (apt-get source with a private source list) and prints the unpacked tree's path.
sqlcipher_source_fetch_sid() {
    local apt="$SQLCIPHER_SOURCE_DIR/apt"
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/src"
    cat >"$apt/sources.list" <<'EOF'
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main
EOF
    local opts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o Dir::Etc::sourceparts=/dev/null
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root)
    apt-get "${opts[@]}" -qq update >&2
    local version
    version=$(apt-cache "${opts[@]}" showsrc sqlcipher | sed -n 's/^Version: //p' | sort -V | tail -1)
    if [ -z "$version" ]; then
        echo "Scripts/sqlcipher-source.sh: sid has no sqlcipher source package" >&2
        return 1
    fi
    local tree="$apt/src/sqlcipher-${version%-*}"
    if [ ! -f "$tree/debian/rules" ]; then
        rm -rf "$apt/src" && mkdir -p "$apt/src"
        # An explicit version: apt-get source would otherwise look for the installed package's version.
        (cd "$apt/src" && apt-get "${opts[@]}" -qq source --download-only "sqlcipher=$version" >&2 \
            && dpkg-source --no-check -x ./*.dsc "$tree" >&2) || {
            echo "Scripts/sqlcipher-source.sh: could not fetch the sid source package sqlcipher $version" >&2
            return 1
        }
    fi
    echo "$tree"
}

# sqlcipher_source_version: the version the installed line reports (PRAGMA cipher_version), or nothing.
sqlcipher_source_version() {
    cat "$SQLCIPHER_SOURCE_DIR/version" 2>/dev/null || true
}

# sqlcipher_newest_fetch: downloads SQLCIPHER_NEWEST_PYPI's sdist by name from the package index pip uses
# (PIP_INDEX_URL, default PyPI; its JSON page states each file's sha256), checks that sha256 against the
# pinned one and the index's, unpacks it into the cache folder and prints the folder of its amalgamation
# (sqlite3.c, sqlite3.h). Cached: the same version and checksum is downloaded once per machine.
sqlcipher_newest_fetch() {
    local name="${SQLCIPHER_NEWEST_PYPI[0]}" version="${SQLCIPHER_NEWEST_PYPI[1]}" sha="${SQLCIPHER_NEWEST_PYPI[2]}"
    local dir="$SQLCIPHER_CACHE/$name-$version-${sha:0:16}"
    local vendor="$dir/$name-$version/vendor"
    if [ -f "$dir/.verified" ] && [ -f "$vendor/sqlite3.c" ]; then echo "$vendor"; return 0; fi
    local index="${PIP_INDEX_URL:-https://pypi.org/simple}"
    echo "Fetching $name $version (the SQLCipher $SQLCIPHER_NEWEST_VERSION amalgamation) from $index" >&2
    rm -rf "$dir" && mkdir -p "$dir" && chmod 700 "$dir"
    # The index's JSON form (PEP 691): the sdist's URL and the sha256 the index states for it.
    local listing
    listing=$(curl -fsSL -m 60 -H 'Accept: application/vnd.pypi.simple.v1+json' "${index%/}/$name/" \
        | python3 -c '
import json, sys
for f in json.load(sys.stdin).get("files", []):
    if f.get("filename") == sys.argv[1]:
        print(f["url"], f.get("hashes", {}).get("sha256", ""))
        break
' "$name-$version.tar.gz") || listing=""
    local url="${listing% *}" index_sha="${listing##* }"
    if [ -z "$listing" ] || [ -z "$url" ]; then
        echo "Scripts/sqlcipher-source.sh: the index $index lists no $name-$version.tar.gz" >&2
        return 1
    fi
    if [ "$index_sha" != "$sha" ]; then
        echo "Scripts/sqlcipher-source.sh: the index states sha256 '$index_sha' for $name $version, not the" \
            "pinned $sha" >&2
        return 1
    fi
    curl -fsSL -m 600 -o "$dir/$name-$version.tar.gz" "$url" || {
        echo "Scripts/sqlcipher-source.sh: could not download $url" >&2
        return 1
    }
    if [ "$(sha256sum "$dir/$name-$version.tar.gz" | cut -d' ' -f1)" != "$sha" ]; then
        echo "Scripts/sqlcipher-source.sh: $name-$version.tar.gz does not have the pinned sha256 $sha" >&2
        rm -f "$dir/$name-$version.tar.gz"
        return 1
    fi
    tar -xzf "$dir/$name-$version.tar.gz" -C "$dir" "$name-$version/vendor" || return 1
    if ! grep -q "define CIPHER_VERSION_NUMBER $SQLCIPHER_NEWEST_VERSION\$" "$vendor/sqlite3.c"; then
        echo "Scripts/sqlcipher-source.sh: $name $version does not vendor SQLCipher $SQLCIPHER_NEWEST_VERSION" >&2
        return 1
    fi
    touch "$dir/.verified"
    echo "$vendor"
}

# sqlcipher_source_install [TREE]: builds the SQLCipher of TREE (default: $SQLCIPHER_SOURCE_TREE when set,
# else the sid source package) into the prefix, unless the prefix already holds a build of the same source.
# TREE is a SQLCipher source tree (VERSION, configure) or a folder holding a SQLCipher amalgamation
# (sqlite3.c and sqlite3.h, and shell.c if a shell is wanted). A built amalgamation's library is also kept
# in the cache folder, keyed by its checksum, and copied from there when another clone asks for it.
sqlcipher_source_install() {
    local tree="${1:-${SQLCIPHER_SOURCE_TREE:-}}"
    if [ -z "$tree" ]; then tree=$(sqlcipher_source_fetch_sid) || return 1; fi
    tree=$(cd "$tree" && pwd) || return 1
    local amalgamation=""
    if [ -f "$tree/sqlite3.c" ] && [ -f "$tree/sqlite3.h" ] \
        && grep -q 'define CIPHER_VERSION_NUMBER' "$tree/sqlite3.c"; then
        amalgamation=$tree
    elif [ ! -f "$tree/VERSION" ] || { [ ! -f "$tree/src/sqlcipher.h" ] && [ ! -f "$tree/src/crypto.h" ]; }; then
        echo "Scripts/sqlcipher-source.sh: $tree is neither a SQLCipher source tree nor an amalgamation" >&2
        return 1
    fi
    # The source's identity: a source tree's path and the checksum of its version files and crypto sources;
    # an amalgamation's checksum alone (its library may have been built for another clone).
    local identity
    if [ -n "$amalgamation" ]; then
        local parts=("$tree/sqlite3.c" "$tree/sqlite3.h")
        if [ -f "$tree/shell.c" ]; then parts+=("$tree/shell.c"); fi
        identity=$(cat "${parts[@]}" | sha256sum | cut -c1-16)
    else
        identity=$(cd "$tree" && { echo "$tree"; cat VERSION src/crypto*.c src/crypto*.h src/sqlcipher.* 2>/dev/null || true; } \
            | sha256sum | cut -c1-16)
    fi
    if [ -f "$SQLCIPHER_SOURCE_DIR/.installed-$identity" ]; then return 0; fi
    local build="$SQLCIPHER_SOURCE_DIR/src-build"
    rm -rf "$build" "$SQLCIPHER_SOURCE_DIR/prefix" "$SQLCIPHER_SOURCE_BIN" "$SQLCIPHER_SOURCE_DIR"/.installed-*
    mkdir -p "$build" "$SQLCIPHER_SOURCE_LIBDIR" "$SQLCIPHER_SOURCE_PREFIX/include/sqlcipher" \
        "$SQLCIPHER_SOURCE_PKGCONFIG"
    local cached="$SQLCIPHER_CACHE/lib-$identity" lib="$SQLCIPHER_SOURCE_LIBDIR/$SQLCIPHER_SOURCE_SONAME"
    if [ -n "$amalgamation" ] && [ -f "$cached/.built" ]; then
        echo "SQLCipher from $tree: the library built before, from $cached" >&2
        cp "$cached/$SQLCIPHER_SOURCE_SONAME" "$lib"
        cp "$cached/sqlite3.h" "$SQLCIPHER_SOURCE_PREFIX/include/sqlcipher/sqlite3.h"
    else
        echo "Building SQLCipher from $tree into $SQLCIPHER_SOURCE_DIR (a few minutes)" >&2
        if [ -n "$amalgamation" ]; then
            cp "$tree/sqlite3.c" "$tree/sqlite3.h" "$build/"
            if [ -f "$tree/shell.c" ]; then cp "$tree/shell.c" "$build/"; fi
        else
            # configure (autoconf in 3.x-4.6, autosetup from 4.7) only to generate the amalgamation and the
            # shell's source; the compile below sets every option itself.
            (cd "$build" && "$tree/configure" --disable-tcl >configure.log 2>&1 \
                && nice -n 5 make -j2 sqlite3.c shell.c >make.log 2>&1) || {
                tail -30 "$build/configure.log" "$build/make.log" >&2 2>/dev/null || true
                echo "Scripts/sqlcipher-source.sh: configure or make sqlite3.c failed in $build" >&2
                return 1
            }
        fi
        local flags=("${SQLCIPHER_SOURCE_CFLAGS[@]}")
        # From 4.7 SQLCipher starts and stops with SQLite through these hooks (its README's build rules).
        if grep -q 'sqlcipher_extra_init' "$build/sqlite3.c"; then
            flags+=(-DSQLITE_EXTRA_INIT=sqlcipher_extra_init -DSQLITE_EXTRA_SHUTDOWN=sqlcipher_extra_shutdown)
        fi
        nice -n 5 gcc "${flags[@]}" -shared -Wl,-soname,"$SQLCIPHER_SOURCE_SONAME" -Wl,-z,relro,-z,now \
            -o "$lib" "$build/sqlite3.c" -lcrypto -lm -lpthread -ldl || return 1
        cp "$build/sqlite3.h" "$SQLCIPHER_SOURCE_PREFIX/include/sqlcipher/sqlite3.h"
        if [ -n "$amalgamation" ]; then
            rm -rf "$cached" && mkdir -p "$cached"
            cp "$lib" "$build/sqlite3.h" "$cached/" && touch "$cached/.built"
        fi
    fi
    ln -sf "$SQLCIPHER_SOURCE_SONAME" "$SQLCIPHER_SOURCE_LIBDIR/libsqlcipher.so"
    if [ -f "$tree/src/sqlite3ext.h" ]; then
        cp "$tree/src/sqlite3ext.h" "$SQLCIPHER_SOURCE_PREFIX/include/sqlcipher/sqlite3ext.h"
    elif [ -f "$build/sqlite3ext.h" ]; then
        cp "$build/sqlite3ext.h" "$SQLCIPHER_SOURCE_PREFIX/include/sqlcipher/sqlite3ext.h"
    fi
    if [ -f "$build/shell.c" ]; then
        mkdir -p "$SQLCIPHER_SOURCE_PREFIX/bin" "$SQLCIPHER_SOURCE_BIN"
        nice -n 5 gcc -O2 -DSQLITE_HAS_CODEC -I"$build" -c -o "$build/shell.o" "$build/shell.c" || return 1
        gcc -o "$SQLCIPHER_SOURCE_PREFIX/bin/sqlcipher" "$build/shell.o" -L"$SQLCIPHER_SOURCE_LIBDIR" -lsqlcipher \
            -lm -Wl,-rpath,"$SQLCIPHER_SOURCE_LIBDIR" || return 1
        # The shell on PATH for the interop tests (its rpath already names the private library).
        printf '#!/bin/sh\nexec "%s" "$@"\n' "$SQLCIPHER_SOURCE_PREFIX/bin/sqlcipher" >"$SQLCIPHER_SOURCE_BIN/sqlcipher"
        chmod 755 "$SQLCIPHER_SOURCE_BIN/sqlcipher"
    fi
    # The version the library reports at run time (PRAGMA cipher_version), asked through Python's ctypes:
    # the line may have no shell.
    local version
    version=$(python3 -c '
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
db, stmt = ctypes.c_void_p(), ctypes.c_void_p()
lib.sqlite3_column_text.restype = ctypes.c_char_p
lib.sqlite3_open(b":memory:", ctypes.byref(db))
lib.sqlite3_prepare_v2(db, b"PRAGMA cipher_version", -1, ctypes.byref(stmt), None)
if lib.sqlite3_step(stmt) == 100:
    print(lib.sqlite3_column_text(stmt, 0).decode().split(" ")[0])
lib.sqlite3_finalize(stmt)
lib.sqlite3_close(db)
' "$lib" 2>/dev/null) || version=""
    if [ -z "$version" ]; then
        echo "Scripts/sqlcipher-source.sh: the built library reports no cipher_version" >&2
        return 1
    fi
    cat >"$SQLCIPHER_SOURCE_PKGCONFIG/sqlcipher.pc" <<EOF
# SQLCipher $version built from $tree in a private prefix (written by Scripts/sqlcipher-source.sh).
Name: SQLCipher
Description: SQLCipher $version, built from source, private prefix
Version: $version
Libs: -L$SQLCIPHER_SOURCE_LIBDIR -lsqlcipher
Cflags: -I$SQLCIPHER_SOURCE_PREFIX/include
EOF
    cat >"$SQLCIPHER_SOURCE_PKGCONFIG/libcrypto.pc" <<'EOF'
# OpenSSL's libcrypto without -L/-I, so the system folder never comes ahead of the private SQLCipher.
Name: OpenSSL-libcrypto
Description: OpenSSL cryptography library (system), for the SQLCipher source build
Version: 3
Libs: -lcrypto
Cflags:
EOF
    echo "$version" >"$SQLCIPHER_SOURCE_DIR/version"
    touch "$SQLCIPHER_SOURCE_DIR/.installed-$identity"
    echo "SQLCipher $version installed in $SQLCIPHER_SOURCE_PREFIX" >&2
}

# Runs a command with the line's pkg-config folder and shell.
with_sqlcipher_source() {
    PKG_CONFIG_PATH="$SQLCIPHER_SOURCE_PKGCONFIG" PATH="$SQLCIPHER_SOURCE_BIN:$PATH" "$@"
}
