#!/usr/bin/env bash
# An older Debian root filesystem to run the bundle in: `old_debian_rootfs.sh SUITE DEST [ARCH]`.
# ARCH (default this machine's): arm64 on an x86_64 machine needs qemu-aarch64 registered with
# binfmt_misc (build/arm64-root.sh --check), as debootstrap's second stage runs inside the root.
# minbase: the essential packages only (no Python, as in many engine images' bases).
# Cached: an existing DEST (with its .complete mark) is reused, so only the first run pays
# (~40 s on 2 cores); build/out/ is removed by `make clean`. Needs root.
set -euo pipefail

SUITE="${1:?usage: old_debian_rootfs.sh SUITE DEST [ARCH]}"
DEST="${2:?usage: old_debian_rootfs.sh SUITE DEST [ARCH]}"
ARCH_ARGS=()
[ -n "${3:-}" ] && ARCH_ARGS=(--arch="$3")
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

[ -f "$DEST/.complete" ] && exit 0
[ "$(id -u)" = 0 ] || { echo "old_debian_rootfs: needs root (debootstrap)" >&2; exit 1; }

if ! command -v debootstrap >/dev/null; then
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2
fi

# Built beside DEST and renamed at the end: an interrupted run never leaves a half root.
partial="$DEST.partial"
rm -rf --one-file-system "$partial"
mkdir -p "$(dirname "$DEST")"
debootstrap "${ARCH_ARGS[@]}" --variant=minbase "$SUITE" "$partial" "$MIRROR" >&2
rm -f "$partial"/var/cache/apt/archives/*.deb  # 36 MB the tests never use
touch "$partial/.complete"
rm -rf --one-file-system "$DEST"
mv "$partial" "$DEST"
