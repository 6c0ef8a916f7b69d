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
