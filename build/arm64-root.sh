#!/usr/bin/env bash
# The arm64 Debian root that the linux/arm64 executables are built in, under qemu:
#
#   build/arm64-root.sh [--check | --path | --run [--bind DIR:PATH]... COMMAND...]
#
# An x86_64 machine builds arm64 executables without arm64 hardware: Debian's qemu-user-static,
# registered with binfmt_misc (flag F: the interpreter is opened at registration, so it works
# inside a chroot), runs every aarch64 ELF transparently, and a debootstrap'ed arm64 bookworm
# root holds the same Debian Python 3.11, binutils and libc the x86_64 build uses, plus the C
# toolchain staticx's source distribution needs (it publishes no aarch64 wheel): gcc, musl-gcc
# (its bootloader, as its own wheels are built) and scons.
#
# The root lives OUTSIDE the source tree, in a cache reused when present (CI runs on a fresh
# clone): $MODELDRAIN_ARM64_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/modeldrain-arm64. It is
# keyed on the suite and the package list: change either and it is made again. `make clean`
# leaves it; `make clean-arm64` removes it.
#
# --check   makes nothing: exit 0 if this machine can build for arm64, else exit 3 with the
#           reason (not root, not x86_64/aarch64 Debian, qemu-aarch64 not registered and no
#           root to register it). The tests skip on it, except under CI=true.
# Without a flag it makes the root when missing, then prints its path.
# --path    prints the root's path and makes nothing (`make clean-arm64` removes it).
# --run     runs COMMAND chrooted into the root (made when missing), as root, with /dev, /proc
#           and each DIR (at PATH inside) mounted in a private mount namespace: every mount
#           vanishes with the command, even when it is killed. build/bundle.sh builds this way.
# Needs root the first time (apt, debootstrap, binfmt_misc registration).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${MODELDRAIN_ARM64_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/modeldrain-arm64}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# The same Debian as the x86_64 build (docs/build.md): the bundle's glibc floor is staticx's
# business, but the Python and binutils it freezes with should be the same release.
SUITE=bookworm
ROOT="$CACHE/$SUITE-root"

# Exit status when this machine cannot build (as build/bundle.sh): distinct from a failure (1).
EXIT_CANNOT_BUILD=3

# What the arm64 root holds beyond minbase, and why:
#   python3.11 libpython3.11 python3.11-venv binutils libc-bin   as build/bundle.sh's APT_PACKAGES
#   gcc libc6-dev musl-tools scons   staticx's source distribution: its bootloader is a static
#                                    C program (musl-gcc, as upstream's wheels), built by scons
#                                    (build/bundle.sh installs whichever of these are missing too)
#   ca-certificates                  pip over TLS from inside the root
# Installed by apt inside the root after a minbase debootstrap: debootstrap's own --include
# resolves no virtual packages (python3.11-venv needs python3.11-distutils, which
# python3-distutils provides) and leaves such a package unconfigured.
ROOT_PACKAGES=(python3.11 libpython3.11 python3.11-venv binutils libc-bin
               gcc libc6-dev musl-tools scons ca-certificates)
# What the host needs: qemu-aarch64 and its binfmt_misc registration, and debootstrap.
HOST_PACKAGES=(qemu-user-static binfmt-support debootstrap)
BINFMT=/proc/sys/fs/binfmt_misc

log() { printf 'arm64-root: %s\n' "$*" >&2; }
cannot_build() { printf 'arm64-root: cannot build for arm64 here: %s\n' "$*" >&2; exit "$EXIT_CANNOT_BUILD"; }

root_key() { printf '%s\n' "$SUITE" "$MIRROR" "${ROOT_PACKAGES[@]}" | sha256sum | cut -d' ' -f1; }

# An aarch64 ELF runs here when the kernel has a binfmt_misc entry for it (or the machine is one).
aarch64_runs() {
    [ "$(uname -m)" = aarch64 ] && return 0
    [ -f "$BINFMT/qemu-aarch64" ] && grep -qx enabled "$BINFMT/qemu-aarch64"
}

ensure_host() {
    case "$(uname -m)" in
        x86_64 | aarch64) ;;
        *) cannot_build "the host is $(uname -m) (x86_64 with qemu, or aarch64)" ;;
    esac
    command -v dpkg-query >/dev/null || cannot_build "not Debian-like (needs ${HOST_PACKAGES[*]})"
    local missing=() package
    for package in "${HOST_PACKAGES[@]}"; do
        dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null | grep -qx installed \
            || missing+=("$package")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        [ "$(id -u)" = 0 ] || cannot_build "missing Debian packages: ${missing[*]} (install them, or run as root)"
        [ "$CHECK_ONLY" = 1 ] && return
        log "installing ${missing[*]}"
        apt-get -o DPkg::Lock::Timeout=600 update -q >&2
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
            --no-install-recommends "${missing[@]}" >&2
    fi
    aarch64_runs && return
    [ "$(id -u)" = 0 ] || cannot_build "qemu-aarch64 is not registered with binfmt_misc (run as root once, or: update-binfmts --enable qemu-aarch64)"
    [ "$CHECK_ONLY" = 1 ] && return
    # A container's /proc may lack binfmt_misc until mounted; the registration is kernel-wide.
    [ -f "$BINFMT/register" ] || mount -t binfmt_misc binfmt_misc "$BINFMT" \
        || cannot_build "cannot mount binfmt_misc at $BINFMT"
    update-binfmts --enable qemu-aarch64 >&2 || cannot_build "update-binfmts --enable qemu-aarch64 failed"
    aarch64_runs || cannot_build "qemu-aarch64 registered, but binfmt_misc does not show it enabled"
}

ensure_root() {
    local key
    key="$(root_key)"
    if [ -f "$ROOT/.complete" ] && [ "$(cat "$ROOT/.complete")" = "$key" ]; then
        return
    fi
    [ "$(id -u)" = 0 ] || cannot_build "no arm64 root in $CACHE yet, and making one needs root"
    # Made beside ROOT and renamed at the end: an interrupted run never leaves a half root.
    local partial="$ROOT.partial"
    rm -rf --one-file-system "$partial"
    mkdir -p "$CACHE"
    log "debootstrap --arch arm64 $SUITE into $ROOT (minutes under emulation)"
    local packages
    debootstrap --arch=arm64 --variant=minbase "$SUITE" "$partial" "$MIRROR" >&2
    log "apt-get install ${ROOT_PACKAGES[*]} inside it"
    cp -fL /etc/resolv.conf "$partial/etc/resolv.conf"
    run_in "$partial" env DEBIAN_FRONTEND=noninteractive /bin/bash -c \
        'apt-get -q update && apt-get install -y -q --no-install-recommends "$@" && apt-get clean' \
        bash "${ROOT_PACKAGES[@]}" >&2
    echo "$key" > "$partial/.complete"
    rm -rf --one-file-system "$ROOT"
    mv "$partial" "$ROOT"
}

# run_in ROOT [--bind DIR:PATH]... COMMAND...: COMMAND chrooted into ROOT, private mounts.
run_in() {
    local root=$1 binds=()
    shift
    while [ "${1:-}" = --bind ]; do
        binds+=("${2:?--bind DIR:PATH}")
        shift 2
    done
    [ $# -gt 0 ] || usage
    unshare --mount --propagation private -- /bin/bash -c '
        set -e
        root=$1 count=$2; shift 2
        mount --rbind /dev "$root/dev"
        mount -t proc proc "$root/proc"
        while [ "$count" -gt 0 ]; do
            mkdir -p "$root${1#*:}"
            mount --bind "${1%%:*}" "$root${1#*:}"
            shift; count=$((count - 1))
        done
        exec chroot "$root" "$@"
    ' bash "$root" "${#binds[@]}" ${binds[@]+"${binds[@]}"} "$@"
}

usage() { echo "usage: build/arm64-root.sh [--check | --path | --run [--bind DIR:PATH]... COMMAND...]" >&2; exit 2; }

CHECK_ONLY=0
RUN=0
case "${1:-}" in
    "") ;;
    --check) CHECK_ONLY=1 ;;
    --path) echo "$ROOT"; exit 0 ;;
    --run) RUN=1; shift ;;
    *) usage ;;
esac

ensure_host
if [ "$CHECK_ONLY" = 1 ]; then
    [ -f "$ROOT/.complete" ] || [ "$(id -u)" = 0 ] || cannot_build "no arm64 root in $CACHE, and making one needs root"
    [ -w "$REPO" ] || cannot_build "$REPO is not writable"
    exit 0
fi
mkdir -p "$CACHE"
exec 8>"$CACHE/.root.lock"  # one debootstrap at a time
flock 8
ensure_root
exec 8>&-
if [ "$RUN" = 1 ]; then
    run_in "$ROOT" "$@"
else
    echo "$ROOT"
fi
