# Shared by the scripts: install what is missing from Debian's packages (with sudo when not root).
ensure_packages() {
    local missing=()
    local pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    ((${#missing[@]})) || return 0
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    echo "Installing: ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ensure_swift() {
    if ! command -v swift >/dev/null 2>&1; then
        if [ -x /opt/swift/usr/bin/swift ]; then
            export PATH="/opt/swift/usr/bin:$PATH"
        else
            echo "Swift 6 is required (https://swift.org/install); it was not found on PATH or in /opt/swift." >&2
            exit 1
        fi
    fi
}

# The native packages the library, its tests and its tools need.
FMDB_PACKAGES=(libsqlcipher-dev libssl-dev sqlcipher pkg-config openssl)

# static_tool_build_args [FOLDER]: the arguments of the tool's installed build (Scripts/install), in the
# array static_args: release, the Swift runtime and Foundation linked statically, in FOLDER (default
# .build-static; a folder holds the build of one SQLCipher; also in static_folder), linked with the toolchain's
# lld. gold repeats
# glibc's link-time note on mktemp(3) for a function of the static Foundation the tool never calls ("the use
# of `mktemp' is dangerous"), a warning on every install that says nothing about this build; lld does not
# copy .gnu.warning notes, and links faster. The toolset file is rewritten only when it changes (a new
# one makes SwiftPM rebuild everything).
static_tool_build_args() {
    local folder="${1:-.build-static}"
    static_folder=$folder
    static_args=(-c release --static-swift-stdlib --scratch-path "$folder")
    local lld toolset
    lld="$(dirname "$(command -v swift)")/ld.lld"
    [ -x "$lld" ] || return 0
    mkdir -p "$folder"
    toolset="$folder/install-toolset.json"
    printf '{ "schemaVersion": "1.0", "linker": { "path": "%s" } }\n' "$lld" >"$toolset.new"
    if cmp -s "$toolset.new" "$toolset"; then rm "$toolset.new"; else mv "$toolset.new" "$toolset"; fi
    static_args+=(--toolset "$toolset")
}
