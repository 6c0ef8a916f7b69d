# SQLCipher 4.6.1 (Debian's bookworm-backports packages) in a private prefix, beside the system's 3.4.1.
# Sourced by Scripts/test, Scripts/demo and Scripts/bench. Nothing is installed system-wide: apt-get runs
# with its own source list, package lists and cache under .build-sqlcipher4/, downloads the three .debs
# and `dpkg -x` unpacks them. Cached: a second run does nothing.
#
# Linking it without ever picking up the system's 3.4.1 takes care, because SwiftPM reads .pc files
# itself and keeps every -L and -I they name: libcrypto.pc's `-L/usr/lib/x86_64-linux-gnu` and
# `-I/usr/include` would come ahead of the private prefix, and `-lsqlcipher` would resolve to the
# system's libsqlcipher.so (3.4.1) while the headers came from /usr/include/sqlcipher. So the private
# pkg-config folder holds two files: sqlcipher.pc pointing at the prefix, and a libcrypto.pc without
# -L/-I (OpenSSL is in the default search paths anyway). SwiftPM drops `-Wl,-rpath` from .pc files, so
# the build passes the rpath with -Xlinker. `sqlcipher4_verify` then proves the result (ldd + runtime).

SQLCIPHER4_VERSION="4.6.1"
SQLCIPHER4_DIR="${SQLCIPHER4_DIR:-$PWD/.build-sqlcipher4}"
SQLCIPHER4_PREFIX="$SQLCIPHER4_DIR/prefix/usr"
SQLCIPHER4_LIBDIR="$SQLCIPHER4_PREFIX/lib/x86_64-linux-gnu"
SQLCIPHER4_PKGCONFIG="$SQLCIPHER4_DIR/pkgconfig"
SQLCIPHER4_BIN="$SQLCIPHER4_DIR/bin"
# The build folder of the 4.x stage: its own, so the two lines never share build products.
SQLCIPHER4_SCRATCH="$SQLCIPHER4_DIR/build"

sqlcipher4_install() {
    if [ -f "$SQLCIPHER4_DIR/.installed-$SQLCIPHER4_VERSION" ]; then return 0; fi
    echo "Fetching SQLCipher $SQLCIPHER4_VERSION from Debian bookworm-backports into $SQLCIPHER4_DIR" >&2
    local apt="$SQLCIPHER4_DIR/apt"
    rm -rf "$SQLCIPHER4_DIR/prefix" "$apt"
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs" "$SQLCIPHER4_PKGCONFIG" "$SQLCIPHER4_BIN"
    cat >"$apt/sources.list" <<'EOF'
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-backports main
EOF
    local opts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o Dir::Etc::sourceparts=/dev/null
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root)
    apt-get "${opts[@]}" -qq update
    local version
    version=$(apt-cache "${opts[@]}" show sqlcipher | sed -n 's/^Version: //p' | grep "^$SQLCIPHER4_VERSION" | head -1)
    if [ -z "$version" ]; then
        echo "Scripts/sqlcipher4.sh: bookworm-backports has no sqlcipher $SQLCIPHER4_VERSION" >&2
        return 1
    fi
    (cd "$apt/debs" && apt-get "${opts[@]}" -qq download "libsqlcipher-dev=$version" "libsqlcipher1=$version" "sqlcipher=$version")
    local deb
    for deb in "$apt"/debs/*.deb; do dpkg -x "$deb" "$SQLCIPHER4_DIR/prefix"; done
    # Only the shared library: with the static archive beside it, nothing changes, but keep the prefix lean.
    rm -f "$SQLCIPHER4_LIBDIR/libsqlcipher.a"
    cat >"$SQLCIPHER4_PKGCONFIG/sqlcipher.pc" <<EOF
# SQLCipher $SQLCIPHER4_VERSION in a private prefix (written by Scripts/sqlcipher4.sh).
Name: SQLCipher
Description: SQLCipher $SQLCIPHER4_VERSION (Debian bookworm-backports), private prefix
Version: $SQLCIPHER4_VERSION
Libs: -L$SQLCIPHER4_LIBDIR -lsqlcipher
Cflags: -I$SQLCIPHER4_PREFIX/include
EOF
    cat >"$SQLCIPHER4_PKGCONFIG/libcrypto.pc" <<'EOF'
# OpenSSL's libcrypto without -L/-I, so the system folder never comes ahead of the private SQLCipher.
Name: OpenSSL-libcrypto
Description: OpenSSL cryptography library (system), for the SQLCipher 4 build
Version: 3
Libs: -lcrypto
Cflags:
EOF
    # The shell of the same version, on PATH for the interop tests (it needs the private library).
    cat >"$SQLCIPHER4_BIN/sqlcipher" <<EOF
#!/bin/sh
LD_LIBRARY_PATH="$SQLCIPHER4_LIBDIR\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$SQLCIPHER4_PREFIX/bin/sqlcipher" "\$@"
EOF
    chmod 755 "$SQLCIPHER4_BIN/sqlcipher"
    local shell_version
    shell_version=$("$SQLCIPHER4_BIN/sqlcipher" :memory: "PRAGMA cipher_version;" | cut -d' ' -f1)
    if [ "$shell_version" != "$SQLCIPHER4_VERSION" ]; then
        echo "Scripts/sqlcipher4.sh: the private sqlcipher shell reports '$shell_version'" >&2
        return 1
    fi
    touch "$SQLCIPHER4_DIR/.installed-$SQLCIPHER4_VERSION"
}

# The swift build/test arguments of the 4.x stage; use as: swift build "${SQLCIPHER4_SWIFT_ARGS[@]}".
SQLCIPHER4_SWIFT_ARGS=(--scratch-path "$SQLCIPHER4_SCRATCH" -Xlinker -rpath -Xlinker "$SQLCIPHER4_LIBDIR")

# Runs a command with the 4.x line's pkg-config folder and shell.
with_sqlcipher4() {
    PKG_CONFIG_PATH="$SQLCIPHER4_PKGCONFIG" PATH="$SQLCIPHER4_BIN:$PATH" "$@"
}

# sqlcipher_verify VERSION BINDIR [LIBDIR]: fails unless every binary in BINDIR that links SQLCipher links the
# library of VERSION's line (libsqlcipher.so.0 = 3.x, libsqlcipher.so.1 in the private prefix = 4.x; with
# LIBDIR, a line built from source by Scripts/sqlcipher-source.sh: the libsqlcipher.so.N in LIBDIR) and
# the built fmdb-cipher reports VERSION at run time (PRAGMA cipher_version), and the `sqlcipher` shell
# on PATH is the same version (LINE_SHELL=none: the line has no shell to check). Prints one line saying what
# it found.
sqlcipher_verify() {
    local want="$1" bindir="$2" libdir="${3:-}" binary found=0 linked=""
    local want_lib
    if [ -n "$libdir" ]; then
        want_lib=" => $libdir/libsqlcipher.so."
    else
        case "$want" in
            3.*) want_lib="libsqlcipher.so.0 => /" ;;
            4.*) want_lib="libsqlcipher.so.1 => $SQLCIPHER4_LIBDIR/" ;;
            *) echo "sqlcipher_verify: unknown version $want" >&2; return 1 ;;
        esac
    fi
    for binary in "$bindir/fmdb-cipher" "$bindir/fmdb-test-helper" "$bindir/FMDBCipherPackageTests.xctest"; do
        [ -e "$binary" ] || continue
        found=$((found + 1))
        local libs
        libs=$(env -u LD_LIBRARY_PATH ldd "$binary" | grep -E "libsqlcipher|libsqlite3" || true)
        if [ "$(grep -c . <<<"$libs")" -ne 1 ] || ! grep -qF "$want_lib" <<<"$libs"; then
            echo "Scripts/test: $binary does not link SQLCipher $want alone:" >&2
            echo "$libs" >&2
            return 1
        fi
        linked=$(awk '{print $3}' <<<"$libs")
    done
    if [ "$found" -eq 0 ] || [ ! -e "$bindir/fmdb-cipher" ]; then
        echo "Scripts/test: no built binaries in $bindir" >&2
        return 1
    fi
    local runtime shell
    runtime=$(env -u LD_LIBRARY_PATH "$bindir/fmdb-cipher" --version | sed -nE 's/.*SQLCipher ([0-9.]+).*/\1/p')
    if [ "$runtime" != "$want" ] && [[ "$runtime" != "$want".* ]]; then
        echo "Scripts/test: fmdb-cipher reports SQLCipher '$runtime' at run time, expected $want" >&2
        return 1
    fi
    # LINE_SHELL=none: the line has no shell (its tests that need one skip); any shell on PATH is another's.
    if [ "${LINE_SHELL:-}" = none ]; then
        echo "SQLCipher line verified: $found binaries link $linked, runtime PRAGMA cipher_version $runtime, no shell"
        return 0
    fi
    shell=$(sqlcipher :memory: "PRAGMA cipher_version;" | cut -d' ' -f1)
    if [ "$shell" != "$want" ] && [[ "$shell" != "$want".* ]]; then
        echo "Scripts/test: the sqlcipher shell on PATH is '$shell', expected $want" >&2
        return 1
    fi
    echo "SQLCipher line verified: $found binaries link $linked, runtime PRAGMA cipher_version $runtime, shell $shell"
}
