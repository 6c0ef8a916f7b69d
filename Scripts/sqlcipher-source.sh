# SQLCipher built from source into a private prefix, beside the system's 3.4.1: by default the newest
# Debian has (the `sqlcipher` source package of unstable, sid), or any SQLCipher source tree given by path
# (a release checkout, say v4.5.6). Sourced like Scripts/sqlcipher4.sh, whose linking rules it follows:
# nothing is installed system-wide (apt-get runs with its own source list, package lists and cache under
# the line's folder), the private pkg-config folder holds a sqlcipher.pc for the prefix and a libcrypto.pc
# without -L/-I, and the build passes the rpath with -Xlinker. Cached: a second run with the same source
# does nothing.
#
# The library is built from SQLCipher's amalgamation (sqlite3.c, which every release's configure can make,
# autoconf or autosetup), compiled here with Debian's flags (debian/rules of the sid package: its CFLAGS
# and what its configure options amount to; see SQLCIPHER_SOURCE_CFLAGS) into libsqlcipher.so.2, the soname
# of Debian's libsqlcipher2, so that ldd tells it from the system's libsqlcipher.so.0 and from the 4.6.1
# line's libsqlcipher.so.1. The shell is built from the same tree and linked to that library.
#
#   source Scripts/sqlcipher-source.sh
#   sqlcipher_source_install                  # Debian sid's source package
#   sqlcipher_source_install /path/to/tree    # or a source tree
#   with_sqlcipher_source swift build --build-tests "${SQLCIPHER_SOURCE_SWIFT_ARGS[@]}"
#   with_sqlcipher_source sqlcipher_verify "$(sqlcipher_source_version)" BINDIR "$SQLCIPHER_SOURCE_LIBDIR"

SQLCIPHER_SOURCE_DIR="${SQLCIPHER_SOURCE_DIR:-$PWD/.build-sqlcipher-source}"
SQLCIPHER_SOURCE_PREFIX="$SQLCIPHER_SOURCE_DIR/prefix/usr"
SQLCIPHER_SOURCE_LIBDIR="$SQLCIPHER_SOURCE_PREFIX/lib"
SQLCIPHER_SOURCE_PKGCONFIG="$SQLCIPHER_SOURCE_DIR/pkgconfig"
SQLCIPHER_SOURCE_BIN="$SQLCIPHER_SOURCE_DIR/bin"
# The line's own build folder, so no two lines share build products.
SQLCIPHER_SOURCE_SCRATCH="$SQLCIPHER_SOURCE_DIR/build"
SQLCIPHER_SOURCE_SONAME="libsqlcipher.so.2"
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

# sqlcipher_source_install [TREE]: builds the SQLCipher of TREE (default: $SQLCIPHER_SOURCE_TREE when set,
# else the sid source package) into the prefix, unless the prefix already holds a build of the same source.
sqlcipher_source_install() {
    local tree="${1:-${SQLCIPHER_SOURCE_TREE:-}}"
    if [ -z "$tree" ]; then tree=$(sqlcipher_source_fetch_sid) || return 1; fi
    tree=$(cd "$tree" && pwd) || return 1
    if [ ! -f "$tree/VERSION" ] || { [ ! -f "$tree/src/sqlcipher.h" ] && [ ! -f "$tree/src/crypto.h" ]; }; then
        echo "Scripts/sqlcipher-source.sh: $tree is not a SQLCipher source tree" >&2
        return 1
    fi
    # The source's identity: its path and the checksum of its version files and crypto sources.
    local identity
    identity=$(cd "$tree" && { echo "$tree"; cat VERSION src/crypto*.c src/crypto*.h src/sqlcipher.* 2>/dev/null || true; } \
        | sha256sum | cut -c1-16)
    if [ -f "$SQLCIPHER_SOURCE_DIR/.installed-$identity" ]; then return 0; fi
    echo "Building SQLCipher from $tree into $SQLCIPHER_SOURCE_DIR (a few minutes)" >&2
    local build="$SQLCIPHER_SOURCE_DIR/src-build"
    rm -rf "$build" "$SQLCIPHER_SOURCE_DIR/prefix" "$SQLCIPHER_SOURCE_DIR"/.installed-*
    mkdir -p "$build" "$SQLCIPHER_SOURCE_LIBDIR" "$SQLCIPHER_SOURCE_PREFIX/include/sqlcipher" \
        "$SQLCIPHER_SOURCE_PREFIX/bin" "$SQLCIPHER_SOURCE_PKGCONFIG" "$SQLCIPHER_SOURCE_BIN"
    # configure (autoconf in 3.x-4.6, autosetup from 4.7) only to generate the amalgamation and the shell's
    # source; the compile below sets every option itself.
    (cd "$build" && "$tree/configure" --disable-tcl >configure.log 2>&1 \
        && nice -n 5 make -j2 sqlite3.c shell.c >make.log 2>&1) || {
        tail -30 "$build/configure.log" "$build/make.log" >&2 2>/dev/null || true
        echo "Scripts/sqlcipher-source.sh: configure or make sqlite3.c failed in $build" >&2
        return 1
    }
    local flags=("${SQLCIPHER_SOURCE_CFLAGS[@]}")
    # From 4.7 SQLCipher starts and stops with SQLite through these hooks (its README's build rules).
    if grep -q 'sqlcipher_extra_init' "$build/sqlite3.c"; then
        flags+=(-DSQLITE_EXTRA_INIT=sqlcipher_extra_init -DSQLITE_EXTRA_SHUTDOWN=sqlcipher_extra_shutdown)
    fi
    local lib="$SQLCIPHER_SOURCE_LIBDIR/$SQLCIPHER_SOURCE_SONAME"
    nice -n 5 gcc "${flags[@]}" -shared -Wl,-soname,"$SQLCIPHER_SOURCE_SONAME" -Wl,-z,relro,-z,now \
        -o "$lib" "$build/sqlite3.c" -lcrypto -lm -lpthread -ldl &
    local lib_pid=$!
    nice -n 5 gcc -O2 -DSQLITE_HAS_CODEC -I"$build" -c -o "$build/shell.o" "$build/shell.c"
    wait "$lib_pid"
    ln -sf "$SQLCIPHER_SOURCE_SONAME" "$SQLCIPHER_SOURCE_LIBDIR/libsqlcipher.so"
    gcc -o "$SQLCIPHER_SOURCE_PREFIX/bin/sqlcipher" "$build/shell.o" -L"$SQLCIPHER_SOURCE_LIBDIR" -lsqlcipher -lm \
        -Wl,-rpath,"$SQLCIPHER_SOURCE_LIBDIR"
    cp "$build/sqlite3.h" "$SQLCIPHER_SOURCE_PREFIX/include/sqlcipher/sqlite3.h"
    cp "$tree/src/sqlite3ext.h" "$SQLCIPHER_SOURCE_PREFIX/include/sqlcipher/sqlite3ext.h" 2>/dev/null \
        || cp "$build/sqlite3ext.h" "$SQLCIPHER_SOURCE_PREFIX/include/sqlcipher/sqlite3ext.h"
    local version
    version=$("$SQLCIPHER_SOURCE_PREFIX/bin/sqlcipher" :memory: "PRAGMA cipher_version;" | cut -d' ' -f1)
    if [ -z "$version" ]; then
        echo "Scripts/sqlcipher-source.sh: the built sqlcipher shell reports no cipher_version" >&2
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
    # The shell on PATH for the interop tests (its rpath already names the private library).
    cat >"$SQLCIPHER_SOURCE_BIN/sqlcipher" <<EOF
#!/bin/sh
exec "$SQLCIPHER_SOURCE_PREFIX/bin/sqlcipher" "\$@"
EOF
    chmod 755 "$SQLCIPHER_SOURCE_BIN/sqlcipher"
    echo "$version" >"$SQLCIPHER_SOURCE_DIR/version"
    touch "$SQLCIPHER_SOURCE_DIR/.installed-$identity"
    echo "SQLCipher $version installed in $SQLCIPHER_SOURCE_PREFIX" >&2
}

# The swift build/test arguments of the line; use as: swift build "${SQLCIPHER_SOURCE_SWIFT_ARGS[@]}".
SQLCIPHER_SOURCE_SWIFT_ARGS=(--scratch-path "$SQLCIPHER_SOURCE_SCRATCH" -Xlinker -rpath -Xlinker "$SQLCIPHER_SOURCE_LIBDIR")

# Runs a command with the line's pkg-config folder and shell.
with_sqlcipher_source() {
    PKG_CONFIG_PATH="$SQLCIPHER_SOURCE_PKGCONFIG" PATH="$SQLCIPHER_SOURCE_BIN:$PATH" "$@"
}
